"""`bindery books ...`: a book from a manuscript file (its front matter, its images, its cover), and the
book's metadata, manuscript and assets afterwards."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bindery_cli import manuscripts
from bindery_cli.client import Book, Client
from bindery_cli.manuscripts import Image, Manuscript
from bindery_cli.output import bar, fail, out, out_page

# The flags that override a front matter's keys: (flag's dest, the metadata field, a list?).
OVERRIDES = (
    ("author", "authors", True),
    ("lang", "language", False),
    ("identifier", "identifier", False),
    ("publisher", "publisher", False),
    ("description", "description", False),
    ("subject", "subjects", True),
    ("date", "published", False),
    ("rights", "rights", False),
)
METADATA_FIELDS = {"authors", "language", "identifier", "publisher", "description", "subjects"} | {
    "published",
    "rights",
    "cover",
}
LISTS = {"authors", "subjects"}
PANDOC_NAMES = {pandoc: name for pandoc, (name, _) in manuscripts.KEYS.items()} | {"cover-image": "cover"}


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    books = commands.add_parser("books", help="create, show, edit, update and delete books, and their images")
    actions = books.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[common],
        help="a new book from a markdown file: its front matter, its images, its cover",
        description="A new book from FILE. Its YAML front matter (pandoc's keys: title, author, lang, "
        "identifier, publisher, description, subject, date, rights, cover-image) gives the title and the "
        "metadata; each image the text names, and the cover, is uploaded from beside the file. A flag "
        "overrides the front matter's key. A file without front matter is titled after its name.",
    )
    create.add_argument("file", type=Path)
    _metadata_flags(create)
    listed = actions.add_parser("list", parents=[common], help="your books, newest first")
    listed.add_argument("--limit", type=int)
    listed.add_argument("--cursor")
    show = actions.add_parser("show", parents=[common], help="a book, its metadata, images and chapters")
    show.add_argument("book")
    edit = actions.add_parser(
        "edit",
        parents=[common],
        help="change the title or metadata: a merge patch sent with If-Match of the revision read",
    )
    edit.add_argument("book")
    edit.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="title, or a metadata field (authors, language, identifier, publisher, description, subjects, "
        "published, rights, cover; or pandoc's name: author, lang, subject, date, cover-image). A list "
        'field takes one name or a JSON list: --set \'authors=["A", "B"]\'',
    )
    edit.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a metadata field")
    update = actions.add_parser(
        "update",
        parents=[common],
        help="a new manuscript from FILE (with If-Match of the revision read), its new images, and its "
        "front matter's title and metadata in place of the book's (a field it leaves out is removed)",
    )
    update.add_argument("book")
    update.add_argument("file", type=Path)
    actions.add_parser("delete", parents=[common], help="delete a book and every export of it").add_argument(
        "book"
    )
    assets = actions.add_parser("assets", help="a book's images").add_subparsers(
        dest="assets", required=True, metavar="ACTION"
    )
    assets.add_parser("list", parents=[common], help="the book's images").add_argument("book")
    add = assets.add_parser("add", parents=[common], help="upload an image as NAME (default: FILE's name)")
    add.add_argument("book")
    add.add_argument("file", type=Path)
    add.add_argument("--name", help="the name the manuscript uses for it, e.g. images/map.png")
    remove = assets.add_parser("rm", parents=[common], help="remove an image (not the cover)")
    remove.add_argument("book")
    remove.add_argument("name")


def _metadata_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--title", help="the title (default: the front matter's, else the file's name)")
    parser.add_argument("--author", action="append", help="an author (repeat for more)")
    parser.add_argument("--lang", help="a BCP 47 language tag, e.g. en-GB")
    parser.add_argument("--identifier", help="an ISBN-10 or ISBN-13")
    parser.add_argument("--publisher")
    parser.add_argument("--description")
    parser.add_argument("--subject", action="append", help="a subject (repeat for more)")
    parser.add_argument("--date", help="the publication date, YYYY-MM-DD")
    parser.add_argument("--rights")
    parser.add_argument("--cover", help="an image beside the file to be the cover, e.g. images/cover.jpg")


def run(client: Client, args: argparse.Namespace) -> int:
    if args.action == "create":
        manuscript = manuscripts.read(args.file)
        _override(manuscript, args)
        _note_ignored(args, manuscript)
        images = _ImageBar(args, manuscript.images)
        try:
            book = create(client, manuscript, on_image=images, on_bytes=_bytes_bar(args))
        finally:
            images.close()
        return out(args, book, _summary(book))
    if args.action == "list":
        return out_page(args, client.list_books(args.cursor, args.limit), "books", _summary, "no books")
    if args.action == "show":
        book = client.get_book(args.book)
        lines = [_summary(book)]
        lines += [f"  {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in book.get("metadata", {}).items()]
        lines += [f"  {c['ordinal']:>4}. {c['title']}" for c in book["chapters"]]
        return out(args, book, "\n".join(lines))
    if args.action == "edit":
        return _edit(client, args)
    if args.action == "update":
        manuscript = manuscripts.read(args.file)
        _note_ignored(args, manuscript)
        images = _ImageBar(args, [])
        try:
            book = update(
                client,
                args.book,
                manuscript,
                on_image=images,
                on_fresh=images.start,
                on_bytes=_bytes_bar(args),
            )
        finally:
            images.close()
        return out(args, book, _summary(book))
    if args.action == "delete":
        client.delete_book(args.book)
        return out(args, {"deleted": args.book}, f"deleted {args.book}")
    if args.assets == "list":
        assets = client.get_book(args.book).get("assets", [])
        lines = [
            f"{a['name']}  {a['content_type']}  {a['width']}x{a['height']}  {a['size_bytes']:,} bytes"
            for a in assets
        ]
        return out(args, {"assets": assets}, "\n".join(lines) or "no images")
    if args.assets == "add":
        if not args.file.is_file():
            return fail(args, f"{args.file}: no such file: name an image on this machine")
        if problem := manuscripts.image_problem(args.file):
            return fail(args, f"{args.file}: {problem}")
        name = args.name or args.file.name
        book = client.add_asset(args.book, name, args.file.read_bytes())
        return out(args, book, f"{name} added: {_summary(book)}")
    client.delete_asset(args.book, args.name)
    return out(args, {"removed": args.name, "book": args.book}, f"removed {args.name}")


def create(
    client: Client,
    manuscript: Manuscript,
    *,
    on_image: Callable[[Image], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
) -> Book:
    """The book: created with its title and metadata (the cover apart), then each image uploaded and
    adopted under the name the text uses, then the cover set, with If-Match of the revision the last upload
    made (nobody else's change is overwritten)."""
    metadata = {k: v for k, v in manuscript.metadata.items() if k != "cover"}
    title = manuscript.title or manuscript.path.stem
    book = client.create_book(title, manuscript.text, metadata or None, on_bytes=on_bytes)
    made = book["id"]
    try:
        book = _upload(client, book, manuscript.images, on_image)
        if manuscript.cover is not None:
            cover = {"cover": manuscript.cover.name}
            book = client.edit_book(made, metadata=cover, if_revision=book["revision"])
    except Exception as exc:
        # Half a book (some images, no cover) is worse than none: a rerun would make a second. Undo it.
        try:
            client.delete_book(made)
        except Exception as again:  # whatever it was, the book is still there
            exc.add_note(
                f"the book {made} it made is left half-made ({again}): `bindery books delete {made}`"
            )
        else:
            exc.add_note(f"the book {made} it made was deleted: nothing is left")
        raise
    return book


def update(
    client: Client,
    book_id: str,
    manuscript: Manuscript,
    *,
    on_image: Callable[[Image], None] | None = None,
    on_fresh: Callable[[list[Image]], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
    changed: Callable[[Image, int | None], bool] | None = None,
) -> Book:
    """The new manuscript, sent with If-Match of the revision read (a change made since is refused, never
    overwritten); then each image that is new or changed in size (on_fresh is told which), or, given
    `changed(image, the size the book holds of it or None)`, each it says; then the front matter's title
    and metadata, in place of the book's: a field the front matter leaves out is removed (null in the
    merge patch), and a title it leaves out stays. A file without front matter leaves the title and
    metadata as they are."""
    book = client.get_book(book_id)
    held = {a["name"]: a["size_bytes"] for a in book.get("assets", [])}
    had = set((book.get("metadata") or {}).keys()) & METADATA_FIELDS
    text = manuscript.text.encode("utf-8")
    book = client.replace_manuscript(book_id, text, if_revision=book["revision"], on_bytes=on_bytes)
    changed = changed or _resized
    fresh = [i for i in manuscript.images if changed(i, held.get(i.name))]
    if on_fresh is not None:
        on_fresh(fresh)
    book = _upload(client, book, fresh, on_image)
    if manuscript.front_matter:
        metadata: dict[str, Any] = {name: None for name in sorted(had - manuscript.metadata.keys())}
        metadata |= manuscript.metadata
        if manuscript.title or metadata:
            book = client.edit_book(
                book_id, title=manuscript.title, metadata=metadata or None, if_revision=book["revision"]
            )
    return book


def _resized(image: Image, held: int | None) -> bool:
    """Whether an image is new to the book, or another size than the book's of that name."""
    return held != image.path.stat().st_size


def _upload(
    client: Client, book: Book, images: list[Image], on_image: Callable[[Image], None] | None
) -> Book:
    for image in images:
        book = client.add_asset(book["id"], image.name, image.path.read_bytes(), image.content_type)
        if on_image is not None:
            on_image(image)
    return book


def _override(manuscript: Manuscript, args: argparse.Namespace) -> None:
    """Flags win over the front matter's keys."""
    if args.title:
        manuscript.title = args.title
    for flag, name, listed in OVERRIDES:
        given = getattr(args, flag)
        if given:
            manuscript.metadata[name] = given if listed else given.strip()
    if args.cover:
        cover = manuscripts.image(manuscript.path, args.cover, 0, "--cover")
        manuscript.cover = cover
        manuscript.metadata["cover"] = cover.name
        if all(i.name != cover.name for i in manuscript.images):
            manuscript.images.append(cover)


def _edit(client: Client, args: argparse.Namespace) -> int:
    title, patch = None, {}
    for given in args.set:
        key, sep, value = given.partition("=")
        key = PANDOC_NAMES.get(key.strip(), key.strip())
        if not sep or (key != "title" and key not in METADATA_FIELDS):
            return fail(
                args,
                f"--set {given}: expected KEY=VALUE, KEY title or one of "
                f"{', '.join(sorted(METADATA_FIELDS))}",
            )
        if key == "title":
            title = value
            continue
        parsed: Any = value
        if value.lstrip().startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                return fail(args, f'--set {given}: not a JSON list: write ["A", "B"]')
        elif key in LISTS:
            parsed = [value]
        patch[key] = parsed
    for key in args.unset:
        key = PANDOC_NAMES.get(key, key)
        if key not in METADATA_FIELDS:
            return fail(
                args, f"--unset {key}: not a metadata field: one of {', '.join(sorted(METADATA_FIELDS))}"
            )
        patch[key] = None
    if title is None and not patch:
        return fail(args, "nothing to change: give --set KEY=VALUE or --unset KEY")
    read = client.get_book(args.book)
    book = client.edit_book(args.book, title=title, metadata=patch or None, if_revision=read["revision"])
    return out(args, book, _summary(book))


class _ImageBar:
    """A bar of the images uploaded (none under --json, or without images); closed when the last is up,
    or by `close` when the command ends sooner, so that its error line starts a line of its own."""

    def __init__(self, args: argparse.Namespace, images: list[Image]):
        self.args, self.shown = args, None
        self.start(images)

    def start(self, images: list[Image]) -> None:
        """The bar of these images (update's: only those it uploads, known once it has read the book)."""
        self.close()
        if images:
            self.shown = bar(self.args, total=len(images), unit="image", desc="uploading images")

    def __call__(self, image: Image) -> None:
        if self.shown is not None:
            self.shown.update(1)
            if self.shown.n == self.shown.total:
                self.close()

    def close(self) -> None:
        if self.shown is not None:
            self.shown.close()
            self.shown = None


def _bytes_bar(args: argparse.Namespace) -> Callable[[int, int], None]:
    """A bar for a manuscript that goes up as an upload (over 5 MB), made at its first bytes, when the
    total is known."""
    shown: Any = None

    def sent(done: int, total: int) -> None:
        nonlocal shown
        if shown is None:
            shown = bar(args, unit="B", unit_scale=True, desc="uploading the manuscript", total=total)
        if shown is not None:
            shown.update(done - shown.n)
            if done >= total:
                shown.close()

    return sent


def _note_ignored(args: argparse.Namespace, manuscript: Manuscript) -> None:
    if manuscript.ignored and not args.json:
        print(
            f"bindery: note: {args.file}: front matter keys not read: {', '.join(manuscript.ignored)}",
            file=sys.stderr,
        )


def _summary(book: Any) -> str:
    parts = [book["id"], book["title"], f"revision {book['revision']}"]
    chapters = book["chapters_total"] if "chapters_total" in book else len(book["chapters"])
    parts.append(f"{chapters} chapters")
    images = book["assets_total"] if "assets_total" in book else len(book.get("assets", []))
    if images:
        parts.append(f"{images} images")
    cover = (book.get("metadata") or {}).get("cover")
    if cover:
        parts.append(f"cover {cover}")
    return "  ".join(parts[:2]) + "  " + ", ".join(parts[2:])
