"""A chapter's rendering as a piece a later build of the same book reuses (epub, html, and the pdf's parse).

A piece keeps what the renderer *made* of the chapter: the bytes it writes into the artifact (html: the
chapter's section; epub: its page, already deflated as the zip keeps it; pdf: its Typst source), so a hit
is used as it is, with no markup, encoding or compression redone.

A piece is found by its *lookup*: the hash of the chapter's ordinal, title and its text's SHA-256 (taken
when the manuscript was cut: a build that reuses a chapter's piece never reads its text), the renderer's piece
version, the markdown dialect's version and the metadata the renderer reads into it. It is used only if
its *key* still holds: the lookup and, for every image name the chapter resolved, that image as the revision
has it now (its object id, which names bytes that are never rewritten, its type, size and dimensions; or
its absence); and, for every heading id it linked to (`#id`), the chapter that heading is in now (or its
absence). Its own headings' ids, which the book gives (`bindery.engine.anchors`), are in its lookup. So a
piece is keyed by everything it depends on: an image added, replaced or deleted, or a heading renamed,
moved or added, misses exactly the chapters that name it.

A piece carries what rendering the chapter did besides its bytes: a value of the renderer's (html and epub:
its headings, for the table of contents; pdf: the images its source places), the images it used and its
notes (missing images, empty alt text), and whether it could not be rendered.
Replayed into the build's account in order, a hit leaves the build exactly as a cold render would.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import __version__ as markdown_it_version
from mdit_py_plugins import __version__ as plugins_version

from bindery.engine import Pieces, Report, Text, markup, typography
from bindery.engine.anchors import Anchor, Anchors, Links
from bindery.engine.figures import Figures
from bindery.images import Asset

# What the dialect's output depends on besides our own code: a new markdown-it renders other bytes.
DIALECT = f"markup-{markup.VERSION}/markdown-it-{markdown_it_version}/plugins-{plugins_version}"


# What a piece's account holds besides its bytes.
ACCOUNT = {"value", "skipped", "used", "missing", "missing_total", "warnings", "warnings_total"}


# JSON as the pieces' hashes and accounts hold it, by one encoder (json.dumps makes one a call with these).
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _digest(value: Any) -> str:
    return hashlib.sha256(_json(value).encode()).hexdigest()


def _lookup(head: list[Any], sha256: str) -> str:
    """The hash of `head` (JSON, which never holds a raw NUL) and then, after a NUL, `sha256`: the SHA-256
    of the chapter's text (the cut took it, so a build that reuses the piece never reads the text)."""
    digest = hashlib.sha256(_encoded(head))
    digest.update(b"\0")
    digest.update(sha256.encode())
    return digest.hexdigest()


_last: tuple[list[Any], bytes] = ([], b"[")


def _encoded(head: list[Any]) -> bytes:
    """`head` as JSON. A build's chapters share all of it but their ordinal and title (its last two
    items): the rest is encoded once, not once a chapter (a twentieth of what keeping pieces costs)."""
    global _last
    shared, own = head[:-2], head[-2:]
    if _last[0] != shared:
        _last = (shared, _json(shared).encode()[:-1])
    tail = _json(own).encode()[1:]
    return _last[1] + (b"," + tail if shared and own else tail if own else b"]")


def _asset(asset: Asset | None) -> list[Any] | None:
    if asset is None:
        return None
    return [asset.object_id, asset.content_type, asset.size_bytes, asset.width, asset.height]


@dataclass(frozen=True)
class Made:
    """A chapter as the build uses it: its headings (the contents), and the bytes the renderer made of it."""

    headings: list[markup.Heading]
    data: bytes
    math: bool = False  # whether it holds MathML (an epub's manifest says which pages do)
    listed: bool = True  # whether the contents list it (its title is not `.unlisted`)


def key_of(
    lookup: str, names: Sequence[str], assets: dict[str, Asset], anchors: Anchors | None = None
) -> str:
    """The key of a piece found under `lookup` that resolved `names`: image names (their assets now) and
    `#id`s (the chapter of that heading now) and `[label`s (what the label names in the book now)."""
    if not names:  # most chapters: the JSON below, written out (a lookup is hex)
        return hashlib.sha256(f'["{lookup}",[]]'.encode()).hexdigest()
    return _digest([lookup, [[name, _resolved(name, assets, anchors)] for name in names]])


def _resolved(name: str, assets: dict[str, Asset], anchors: Anchors | None) -> Any:
    if name.startswith("#"):
        found = anchors.find(name[1:]) if anchors is not None else None
        return found.chapter if found is not None else None
    if name.startswith("@"):  # a numbered target's numbers (a figure's, a table's, a section's)
        numbers = anchors.numbers(name[1:]) if anchors is not None else None
        return list(numbers) if numbers is not None else None
    if name.startswith("^"):  # a footnote's label: the definition another chapter has of it now
        note = anchors.notes.get(name[1:]) if anchors is not None else None
        return list(note) if note is not None else None
    if name.startswith("["):  # a link's label: what it names in the book now (no asset's name starts so)
        named = anchors.references().get(name[1:]) if anchors is not None else None
        return [named["href"], named["title"]] if named is not None else None
    return _asset(assets.get(name))


def render_chapter(
    md: Any,
    text: Text,
    report: Report,
    figures: Figures,
    pieces: Pieces | None,
    *,
    version: str,
    made: Callable[[str], bytes],
    reads: Sequence[Any] = (),
    compressed: bool = False,
    anchors: Anchors | None = None,
    href: Callable[[Anchor], str] = lambda anchor: f"#{anchor.id}",
    by_chapter: bool = False,
) -> Made:
    """The chapter's rendering (epub and html), reused when `pieces` holds it, else rendered and kept.
    `made` turns the chapter's HTML into the bytes the renderer writes; it may read only the text's ordinal
    and title and what `reads` names. `compressed`: what it makes is compressed already. With the book's
    `anchors`, its headings have their ids in the book and its internal links go where `href` says; its
    figures and tables are numbered in the book, or `by_chapter`."""

    def links() -> Links | None:
        return Links(anchors, text.ordinal, href, by_chapter=by_chapter) if anchors is not None else None

    if pieces is None:
        rendered = markup.render_chapter(md, text, report.skipped, figures, links())
        return Made(rendered.headings, made(rendered.html), rendered.math, rendered.listed)

    def make(own: Figures, missed: list[Any]) -> tuple[Any, bytes]:
        asked = links()
        rendered = markup.render_chapter(md, text, missed, own, asked)
        if asked is not None:
            own.named.update(asked.asked)  # each `#id` and `[label` it asked of the book
        headings = [[h.level, h.title, h.anchor, h.listed] for h in rendered.headings]
        return {"headings": headings, "math": rendered.math, "listed": rendered.listed}, made(rendered.html)

    own = anchors.own(text.ordinal) if anchors is not None else None
    head = [version, DIALECT, list(reads), own, by_chapter, typography.setting(md)]
    value, data = reused(
        text, report, figures, pieces, head=head, make=make, compressed=compressed, anchors=anchors
    )
    headings = [markup.Heading(*heading) for heading in value["headings"]]
    return Made(headings, data, value["math"], value["listed"])


def reused(
    text: Text,
    report: Report,
    figures: Figures,
    pieces: Pieces,
    *,
    head: list[Any],
    make: Callable[[Figures, list[Any]], tuple[Any, bytes]],
    compressed: bool = False,
    anchors: Anchors | None = None,
) -> tuple[Any, bytes]:
    """A chapter's piece: found in `pieces` under its lookup and key, or made and kept. `make` renders the
    chapter into figures and a skipped list of its own and returns what the build keeps of it: a value
    (JSON) and bytes. `head` is everything besides the chapter's ordinal, title and text that they depend
    on. Found or made, the chapter's account is added to the build's as a cold render adds it."""
    lookup = _lookup([*head, text.ordinal, text.title], text.digest)
    found = pieces.find(lookup, lambda names: key_of(lookup, names, figures.assets, anchors))
    if found is not None:
        piece = _loaded(found)
        if piece is not None:
            _replayed(piece, text, report, figures)
            return piece["value"], piece["data"]
    own = Figures(figures.assets, figures.tag)
    missed: list[Any] = []
    value, data = make(own, missed)
    names = sorted(own.named)
    account = {
        "value": value,
        "skipped": missed,
        "used": list(own.used),
        "missing": own.notes.missing,
        "missing_total": own.notes.missing_total,
        "warnings": own.notes.warnings,
        "warnings_total": own.notes.warnings_total,
    }
    # The account as JSON, then a NUL (JSON never holds a raw one), then the made bytes as they are.
    kept = _account_json(account) + b"\0" + data
    pieces.keep(lookup, key_of(lookup, names, figures.assets, anchors), names, kept, compressed=compressed)
    _replayed(account, text, report, figures)
    return value, data


# Most chapters' account besides their value: nothing skipped, used or noted.
_QUIET = {"skipped": [], "used": [], "missing": [], "missing_total": 0, "warnings": [], "warnings_total": 0}
_QUIET_JSON = json.dumps(_QUIET, separators=(",", ":")).encode()[1:]


def _account_json(account: dict[str, Any]) -> bytes:
    if all(account[name] == quiet for name, quiet in _QUIET.items()):
        return b'{"value":' + _json(account["value"]).encode() + b"," + _QUIET_JSON
    return _json(account).encode()


def _loaded(data: bytes) -> dict[str, Any] | None:
    """The piece, or None for bytes that are not one (its SHA-256 matched, but a piece of an older
    layout, say): the chapter is then rendered cold."""
    account, nul, made = data.partition(b"\0")
    try:
        piece = json.loads(account) if nul else None
    except ValueError:  # UnicodeDecodeError is one
        return None
    if not isinstance(piece, dict) or not piece.keys() >= ACCOUNT:
        return None
    piece["data"] = made
    return piece


def _replayed(piece: dict[str, Any], text: Text, report: Report, figures: Figures) -> None:
    """Add the piece's account to the build's, in the order a cold render adds it."""
    figures.chapter = (text.ordinal, text.title)
    report.skipped.extend(piece["skipped"])
    for name in piece["used"]:
        figures.used.setdefault(name, figures.assets[name])
    notes = figures.notes
    for note in piece["missing"]:
        notes.miss(note)
    notes.missing_total += piece["missing_total"] - len(piece["missing"])
    for note in piece["warnings"]:
        notes.warn(note)
    notes.warnings_total += piece["warnings_total"] - len(piece["warnings"])
