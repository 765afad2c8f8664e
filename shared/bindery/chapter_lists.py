"""A cut's chapter list as one object beside its manuscript, written when the manuscript is cut.

Every build reads its cut's chapters (title, and where the text lies in the manuscript) before its first
chapter. The chapter items are the truth and the API reads them; but a build of 1,200 chapters reading
1,200 items is a Query of about 50-80 ms on DynamoDB Local, a fifth of a warm html re-export, where one GET
of this list is a few milliseconds. The list is written after the cut's items are staged (so the staged
cut's retire marker, written with them, removes it too) and before the cut is published, so a published cut
has it; a cut without one (cut before it existed) or with one that does not read back whole is read from
its items, as before.

The list also holds the cut's anchors (`bindery.engine.anchors`: every heading's id and chapter), which a
build renders against. A list without them (written before they were, or not whole) gives none, and the
build finds them by cutting the manuscript again (`bindery.builds`), so that it makes the same book.

The list also holds each chapter's SHA-256, which the items do not: a build looks a chapter's built piece
up by it (`bindery.engine.chapter_pieces`), so a re-export reads the text of only the chapters it renders
again. A list written before it held them gives none, and the build hashes each text as it reads it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from bindery.faults import StorageError
from bindery.objects import BOOK_PREFIX, Objects
from bindery.observability import logger
from bindery.storage.types import Chapter

if TYPE_CHECKING:
    from bindery.engine.anchors import Anchors  # (the engine's: loaded by a build, not a cold poll)

CONTENT_TYPE = "application/json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def chapters_key(book_id: str, cut: str) -> str:
    """The cut's chapter list, beside its manuscript (`bindery.objects.cut_key`)."""
    return f"{BOOK_PREFIX}{book_id}/{cut}.chapters.json"


def write_chapter_list(
    objects: Objects, book_id: str, cut: str, chapters: list[Chapter], anchors: Anchors | None = None
) -> None:
    rows = [[c.ordinal, c.title, c.offset, c.size_bytes, c.sha256] for c in chapters]
    listed: Any = rows if anchors is None else {"chapters": rows, "anchors": anchors.rows()}
    body = json.dumps(listed, ensure_ascii=False, separators=(",", ":")).encode()
    objects.put_bytes(chapters_key(book_id, cut), body, CONTENT_TYPE)


def read_chapter_list(
    objects: Objects, book_id: str, cut: str, count: int
) -> tuple[list[Chapter] | None, Anchors | None]:
    """The cut's chapters from its list, or None when there is none whole (the caller reads the items): it
    must hold `count` chapters, numbered 1 to `count` in order; and its anchors, or None when it holds
    none whole (a list written before they were kept)."""
    from bindery.engine.anchors import Anchors  # (the engine's: loaded by a build, not a cold poll)

    try:
        data = objects.read_or_none(chapters_key(book_id, cut))
        if data is None:
            return None, None
        listed = json.loads(data)
        rows, anchors = (
            (listed["chapters"], listed["anchors"]) if isinstance(listed, dict) else (listed, None)
        )
        chapters = [_chapter(*row) for row in rows]
    except (StorageError, ValueError, TypeError, KeyError) as exc:
        logger.warning("chapter list unreadable; reading the chapter items", extra={"reason": repr(exc)})
        return None, None
    if [c.ordinal for c in chapters] != list(range(1, count + 1)):
        logger.warning("chapter list does not match its cut; reading the chapter items")
        return None, None
    found = Anchors.from_rows(anchors, count) if anchors is not None else None
    return chapters, found


def _chapter(ordinal: int, title: str, offset: int, size: int, sha256: str = "") -> Chapter:
    """A row of the list; one without a well-formed SHA-256 (a list written before they were) has none."""
    digest = sha256 if isinstance(sha256, str) and _SHA256.fullmatch(sha256) else ""
    return Chapter(int(ordinal), str(title), int(offset), int(size), digest)
