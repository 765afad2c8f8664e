"""How a book changes: one revision at a time, each published by one conditional write.

:class:`Revisions` is what the two book services share (`bindery.library.Library`,
`bindery.assets.BookAssets`), given to each: the caller's book or a 404, If-Match, and the loop that
publishes a change on top of whatever revision is current.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bindery import errors
from bindery.clock import Clock
from bindery.config import Settings
from bindery.errors import not_found
from bindery.ids import valid_id
from bindery.storage import Book, BookRows

# How long a staged cut or asset may wait to be adopted before the GC removes it: past the API's 30 s.
STAGE_GRACE_SECONDS = 300
PUBLISH_TRIES = 5
# An entity tag is quoted (RFC 9110 8.8.3): `3` or `"3` is not one, and is refused rather than guessed at.
_IF_MATCH = re.compile(r'^\s*(?:W/)?"(\d{1,12})"\s*$')

# What a change makes of the current book: the book as it is to be, and the object id of an asset it lets
# go (or None); or None when the book is already as the change would make it. It may raise a 4xx, which
# is answered as it is.
Change = Callable[[Book], tuple[Book, str | None] | None]


class Revisions:
    def __init__(self, settings: Settings, book_rows: BookRows, clock: Clock):
        self.settings, self.book_rows, self.clock = settings, book_rows, clock

    def owned(self, caller: str, book_id: str) -> Book:
        """The caller's book, or the 404 a missing one is."""
        book = self.book_rows.read_book_for_owner(book_id, caller) if valid_id(book_id) else None
        if book is None:
            raise not_found()
        return book

    def publish_change(
        self,
        caller: str,
        book_id: str,
        if_match: str | None,
        change: Change,
        staged: str | None = None,
        read: Book | None = None,
    ) -> Book:
        """Apply `change` to the book's current revision and publish it as the next one. With
        `If-Match: "<revision>"` a book at any other revision answers 412 and nothing changes; without it,
        a change that lost a race is made again on top of the winner. `read`: the book as the caller has
        just read it, tried first (the publish's own condition says whether it is still current)."""
        expected = parse_if_match(if_match)
        for _ in range(PUBLISH_TRIES):
            current, read = read or self.owned(caller, book_id), None
            if expected is not None and expected != current.revision:
                raise precondition_failed(current.revision)
            made = change(current)
            if made is None:
                return current
            changed, retired = made
            now = self.clock()
            published = self.book_rows.publish_change(
                current,
                Book(**{**changed.__dict__, "updated_at": now}),
                staged=staged,
                retired=retired,
                retire_at=now + self.settings.lease_seconds,
            )
            if published is not None:
                return published
        raise errors.Conflict("the book kept changing; try again", code="concurrent_replacement")


def parse_if_match(value: str | None) -> int | None:
    if value is None:
        return None
    found = _IF_MATCH.match(value)
    if found is None:
        raise errors.BadRequest('If-Match must be a revision in quotes, like "3"', code="invalid_if_match")
    return int(found.group(1))


def precondition_failed(current: int) -> errors.PreconditionFailed:
    return errors.PreconditionFailed(
        f"the book is at revision {current}, not the one in If-Match",
        code="revision_mismatch",
        revision=current,
    )
