"""A manuscript file as `bindery books create` reads it: its YAML front matter, read with pandoc's keys,
and the images its text names, found beside it. The text is read as the service reads it (markdown-it, the
same plugins, and the service's own rules for comments: `bindery_cli/comments.py` is its file), so an
image's syntax inside code or a comment is not an image here either.

    ---
    title: The Harbour Light
    author: M. Keeper                 # or a list of names
    lang: en-GB
    cover-image: images/cover.jpg
    ---
    # The Light on the Breakwater
    ...

A front matter is pandoc's YAML metadata block: the file's first line is `---`, the next is not blank, and
a later line `---` or `...` closes it. The text after it is the manuscript. Every mistake is a `FileError`
that names the file, the line and the field (`book.md:3: author: expected a string or a list of strings`),
found before anything is sent.
"""

from __future__ import annotations

import functools
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from markdown_it import MarkdownIt, rules_inline
from markdown_it.rules_inline import StateInline
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.footnote.index import footnote_inline

from bindery_cli import comments, front_matter

# pandoc's key: (Bindery's metadata field, what it holds). title and cover-image are read apart.
KEYS = front_matter.KEYS
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class FileError(Exception):
    """A mistake in a manuscript file, found before anything was sent: `path:line: field: problem`."""

    def __init__(self, path: Path, line: int, where: str, problem: str):
        # Line 0: not the file's own mistake but a flag's (--cover), named as such.
        super().__init__(f"{path}:{line}: {where}: {problem}" if line else f"{where}: {problem}")


@dataclass
class Image:
    name: str  # as the manuscript names it, and the asset's name: images/map.png
    path: Path  # the file beside the manuscript
    line: int

    @property
    def content_type(self) -> str:
        return IMAGE_TYPES[Path(self.name).suffix.lower()]


@dataclass
class Manuscript:
    path: Path
    text: str  # what follows the front matter
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cover: Image | None = None
    images: list[Image] = field(default_factory=list)  # each once, the cover among them, in text order
    ignored: list[str] = field(default_factory=list)  # front matter keys Bindery does not read
    front_matter: bool = False  # the file has one (books update takes its metadata in place of the book's)


def read(path: Path) -> Manuscript:
    """The file's front matter and text, and every local image the text names, each checked to exist."""
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FileError(path, 1, "file", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise FileError(
            path, 0, str(path), f"cannot read it ({exc.strerror}): name a markdown file"
        ) from None
    # A byte-order mark (Windows editors write one) would hide the front matter's opening `---`.
    header, text, first = _split(path, raw.removeprefix("\ufeff"))
    manuscript = Manuscript(path, text)
    if header is not None:
        manuscript.front_matter = True
        _read_front_matter(manuscript, header)
    found: dict[str, Image] = {}
    try:
        named = image_names(text)
    except UnclosedComment as exc:
        problem = "opened (<!--) and never closed (-->): it would hide the rest of the book; close it"
        raise FileError(path, exc.line + first, "HTML comment", problem) from None
    for name, line in named:
        found.setdefault(name, image(path, name, line + first, "image"))
    if manuscript.cover is not None:
        found.setdefault(manuscript.cover.name, manuscript.cover)
    manuscript.images = list(found.values())
    return manuscript


def _split(path: Path, raw: str) -> tuple[str | None, str, int]:
    """(the front matter's YAML or None, the text after it, the file line the text starts on, minus 1)."""
    lines = raw.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---" or len(lines) < 2 or not lines[1].strip():
        return None, raw, 0
    for n, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return "".join(lines[1:n]), "".join(lines[n + 1 :]), n + 1
    raise FileError(path, 1, "front matter", "no closing `---` line: close it, or start the file otherwise")


def _read_front_matter(manuscript: Manuscript, header: str) -> None:
    """The front matter, read by the service's own reader (`bindery_cli/front_matter.py` is its file)."""
    path = manuscript.path
    try:
        found = front_matter.read_yaml(header)
    except front_matter.Mistake as exc:
        raise FileError(path, exc.line, exc.where, exc.problem) from None
    manuscript.title, manuscript.ignored = found.title, found.ignored
    manuscript.metadata.update(found.metadata)
    if found.cover is not None:
        name, line = found.cover
        manuscript.cover = image(path, name, line, "cover-image")
        manuscript.metadata["cover"] = manuscript.cover.name


def image(path: Path, name: str, line: int, where: str) -> Image:
    """The file an image name means, beside the manuscript; refused when it is not there or not one of
    the types Bindery takes, or when the name leaves the manuscript's folder."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        raise FileError(path, line, where, f"{name}: name an image beside the manuscript, by a relative path")
    if pure.suffix.lower() not in IMAGE_TYPES:
        raise FileError(path, line, where, f"{name}: not a PNG, JPEG, GIF or WebP (by its name)")
    file = path.parent / pure
    if not file.is_file():
        raise FileError(path, line, where, f"{name}: no such file beside the manuscript ({file})")
    if problem := image_problem(file, IMAGE_TYPES[pure.suffix.lower()]):
        raise FileError(path, line, where, f"{name}: {problem}")
    return Image(name, file, line)


# The first bytes of each type the API takes (it checks them too, after the book is made): by the bytes,
# not the name, as the API does.
MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}
TYPE_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}


def sniff(head: bytes) -> str | None:
    """The image type the first bytes say, or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for kind, starts in MAGIC.items() if head.startswith(starts)), None)


def image_problem(file: Path, expected: str | None = None) -> str | None:
    """Why the API would refuse this file as an image (not_an_image), or None: checked here, before the
    book is made, so that a refusal cannot leave half a book."""
    try:
        with file.open("rb") as opened:
            head = opened.read(16)
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    found = sniff(head)
    if found is None:
        return "not a PNG, JPEG, GIF or WebP (by its bytes)"
    if expected is not None and found != expected:
        return f"its bytes are a {TYPE_NAMES[found]}'s, its name says {TYPE_NAMES[expected]}: rename it"
    return None


class UnclosedComment(Exception):
    """The text opens an HTML comment at the top level that nothing closes (the API refuses it:
    `unclosed_comment`), on `line` of the text."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


def image_names(text: str) -> list[tuple[str, int]]:
    """Each local image the text names, with the line of the text (1-based) its target ends on, in the
    order of their lines, as often as it is named: where the service's parser finds an image, and nowhere
    else. Inline `![alt](target)` and reference `![alt][label]` images, in paragraphs, headings, table
    cells, links and notes; not in code, nor in a comment. A URL (`https:`, `data:`) or a link within the book
    (`#id`) is not local: an export fetches nothing, so it stays a link."""
    found: list[tuple[str, int]] = []
    noted: dict[int, int] = {}  # an inline note's (`^[...]`) id: the line its text starts on
    in_note = 0
    env: dict[str, Any] = {}
    tokens = _parser().parse(text, env)
    if comments.UNCLOSED in env:
        raise UnclosedComment(env[comments.UNCLOSED] + 1)
    for token in tokens:
        if token.type == "footnote_open":
            in_note = noted.get(token.meta["id"], 0)
        if token.type != "inline":
            continue
        # An inline note's text comes at the end, as a block without lines of its own: it is on its mark's.
        first = token.map[0] + 1 if token.map else in_note
        for child in token.children or ():
            if "at" not in child.meta:
                continue
            line = first + token.content.count("\n", 0, child.meta["at"])
            if child.type == "footnote_ref":
                noted[child.meta["id"]] = line
            elif (name := local_name(str(child.attrGet("src") or ""))) is not None:
                found.append((name, line))
    return sorted(found, key=lambda f: f[1])


def local_name(src: str) -> str | None:
    """The asset's name an image's target gives, as the service reads it (`bindery.engine.figures`): its
    %-escapes decoded (markdown-it writes a space as %20), without a `?query` or `#fragment`, `./` left
    out; None for a URL or an id. An absolute path or one through `..` is kept, for `image` to refuse."""
    if not src or ":" in src.split("/", 1)[0] or src.startswith(("//", "#", "?")):
        return None
    name = urllib.parse.unquote(src.split("#", 1)[0].split("?", 1)[0])
    while name.startswith("./"):
        name = name[2:]
    return name or None


@functools.cache
def _parser() -> MarkdownIt:
    """The service's reading of a manuscript (`bindery.engine.markup.parser`): CommonMark with tables,
    strikethrough, footnotes and definition lists, raw HTML as text, and comments left out by the
    service's own rules. Each image and inline note keeps where its text is, for the line an error names."""
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).use(footnote_plugin)
    md.use(deflist_plugin)
    comments.install(md)
    md.inline.ruler.at("image", _placed(rules_inline.image, end=True))
    md.inline.ruler.at("footnote_inline", _placed(footnote_inline, end=False))
    return md


def _placed(rule: Any, *, end: bool) -> Any:
    """`rule`, with the token it makes told where it is in its inline text (`meta["at"]`): its last
    character's place (an image's target ends there), or its first."""

    def placed(state: StateInline, silent: bool) -> bool:
        start = state.pos
        if not rule(state, silent):
            return False
        if not silent:
            state.tokens[-1].meta["at"] = state.pos - 1 if end else start
        return True

    return placed
