"""The export lifecycle as an API caller sees it: submit, poll, list and cancel.

    pending --finish--> ready --expire / cancel--> expired
       |--fail / sweep--> failed
       `--cancel-------> cancelled

Every arrow is one conditional write in `bindery.storage`; this service decides which arrow a caller's
request tries and turns the outcome into an answer. It holds no AWS call of its own. The build worker's
arrows are `bindery.builds`', the schedules' `bindery.schedules`', and `bindery.wiring` composes each
handler's services.
"""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any

from bindery import engine, errors
from bindery.capacity import RETRY_AFTER_OVER_CAP, SHARD_TRIES, most_targets, over_budget, service_full
from bindery.clock import Clock, iso
from bindery.config import Settings
from bindery.errors import not_found
from bindery.idempotency import idempotency_for, key_reused
from bindery.ids import new_id, valid_export_id, valid_id
from bindery.limits import CallerClass
from bindery.objects import Objects
from bindery.observability import metrics, state_change
from bindery.paging import decode_cursor, encode_cursor, page_size
from bindery.purges import Purges
from bindery.settlement import after_ending
from bindery.states import Cancel, State
from bindery.storage import (
    Accepted,
    BatchRows,
    Book,
    BookRows,
    Export,
    ExportRows,
    Holdings,
    KeyReused,
    NotFound,
    OverBudget,
    OverCap,
    Replayed,
    Revoked,
    ShardFull,
)

RETRY_AFTER_PENDING = 2


def download_name(title: str, extension: str) -> str:
    """The title as a file name: its letters, marks and digits in any script kept (NFC, so a "ü" is one
    character), every run of anything else (spaces, punctuation, a path's slashes, control characters)
    one "-"; at most 80 characters. The download's Content-Disposition carries it as RFC 6266's
    `filename*`, beside an ASCII fallback (Objects.presign_download)."""
    kept = "".join(c if unicodedata.category(c)[0] in "LMN" or c in "._-" else " " for c in title)
    stem = re.sub(r"\s+", "-", unicodedata.normalize("NFC", kept).strip()).strip("-.")[:80].strip("-.")
    return f"{stem or 'book'}.{extension}"


class ExportRequests:
    """Submit, poll, list and cancel: what an API caller does with its exports. A cancel that ends a ready
    link has its bytes deleted now, at once (`Purges.unlink_now`)."""

    def __init__(
        self,
        settings: Settings,
        book_rows: BookRows,
        export_rows: ExportRows,
        batch_rows: BatchRows,
        objects: Objects,
        clock: Clock,
        purges: Purges,
    ):
        self.settings, self.objects, self.clock = settings, objects, clock
        self.book_rows, self.export_rows, self.batch_rows = book_rows, export_rows, batch_rows
        self.purges = purges

    # ---- submit ----------------------------------------------------------------------------------

    def submit(
        self,
        caller: str,
        book_id: str,
        fmt: Any,
        idempotency_key: str | None,
        options: Any = None,
        caller_class: CallerClass = CallerClass.STANDARD,
    ) -> tuple[dict[str, Any], bool]:
        """Accept an export. Returns its view and whether this call created it (False for a replay)."""
        fmt, chosen = engine.format_and_options(fmt, options)
        idempotency_ids = None
        if idempotency_key is not None:
            request = ["POST /exports", book_id, fmt, chosen]
            idempotency_ids = idempotency_for(caller, idempotency_key, request)
        if not valid_id(book_id):
            raise not_found()
        now = self.clock()
        limits = self.settings.limits(caller_class)
        shard = self._any_shard()
        for _ in range(SHARD_TRIES):
            export = Export(
                id=new_id(now, shard),
                book_id=book_id,
                format=fmt,
                state=State.PENDING,
                requested_at=now,
                counted_against=caller,
                options=chosen,
                caller_class=caller_class.value,
            )
            view = self.view(export, book=None, now=now)
            idempotency = None
            if idempotency_ids is not None:
                idempotency = (*idempotency_ids, view)
            outcome = self.export_rows.submit_export(
                export, caller=caller, limits=limits, now=now, idempotency=idempotency
            )
            if not isinstance(outcome, ShardFull):
                break
            # The shard this id named was full: try the one with the most room, as a read of them all says
            # now. None has any: the service is at its cap.
            room = self.export_rows.shard_room()
            shard = max(room, key=lambda k: (room[k], random.random()))
            if room[shard] <= 0:
                raise service_full(self.settings.max_live_exports_total)
        match outcome:
            case Accepted():
                metrics.add_metric(name="ExportsRequested", unit="Count", value=1)
                state_change(export.id, book_id, "export requested", format=fmt)
                return view, True
            case Replayed(response=response):
                return response, False
            case KeyReused():
                raise key_reused()
            case OverCap(live_ids=live):
                raise errors.TooManyLiveExports(
                    f"you have {len(live)} exports in progress, the most allowed at once; "
                    "wait for one to finish or cancel one",
                    live_exports=list(live),
                    retry_after=RETRY_AFTER_OVER_CAP,
                )
            case OverBudget(usage=usage):
                raise over_budget(usage, limits.storage_bytes)
            case ShardFull():
                raise service_full(self.settings.max_live_exports_total)
            case NotFound():
                raise not_found()
        raise AssertionError(outcome)

    def _any_shard(self) -> int:
        """A shard of the global cap, at random among those with any cap: the writes spread over them."""
        caps = self.settings.shard_caps
        return random.choice([k for k, cap in enumerate(caps) if cap > 0])

    # ---- what a caller holds, and may ---------------------------------------------------------------

    def me(self, caller: str, caller_class: CallerClass) -> dict[str, Any]:
        """The caller's class, what it holds now, and every cap it is held to."""
        limits = self.settings.limits(caller_class)
        held = self.export_rows.holdings(caller)
        return {
            "caller": caller,
            "class": caller_class.value,
            "limits": {
                **limits.view(),
                "batch_targets": most_targets(self.settings, limits),
                "live_exports_total": self.settings.max_live_exports_total,
            },
            "live": {"exports": held.live_exports, "batches": held.live_batches},
            "storage": {
                "usage_bytes": held.usage,
                "budget_bytes": limits.storage_bytes,
                "remaining_bytes": max(0, limits.storage_bytes - held.usage),
            },
        }

    def rate_limit(
        self, caller: str, caller_class: CallerClass, held: Holdings | None = None
    ) -> dict[str, str]:
        """The live-export cap as the IETF httpapi draft's RateLimit-* fields. A cap on what is held at once
        has no window: Reset is 0 while there is room, and otherwise the wait Retry-After suggests. Without
        `held`, one eventually consistent read: half the cost, and a header is advice, not the cap's guard."""
        cap = self.settings.limits(caller_class).live_exports
        if held is None:
            held = self.export_rows.holdings(caller, consistent=False)
        remaining = max(0, cap - held.live_exports)
        return {
            "RateLimit-Limit": str(cap),
            "RateLimit-Remaining": str(remaining),
            "RateLimit-Reset": "0" if remaining else str(RETRY_AFTER_OVER_CAP),
        }

    # ---- caller reads ----------------------------------------------------------------------------

    def read(self, caller: str, book_id: str, export_id: str) -> dict[str, Any]:
        """The poll. It reads, presigns, and writes nothing: not even a lease bump."""
        found = None
        if valid_id(book_id) and valid_export_id(export_id):
            found = self.export_rows.read_export_for_owner(book_id, export_id, caller, self.clock())
        if found is None:
            raise not_found()
        export, book = found
        return self.view(export, book=book, now=self.clock())

    def list_exports(self, caller: str, book_id: str, limit: Any, cursor: str | None) -> dict[str, Any]:
        size = page_size(limit)
        start_after = decode_cursor(cursor) if cursor is not None else None
        book = self.book_rows.read_book_for_owner(book_id, caller) if valid_id(book_id) else None
        if book is None:
            raise not_found()
        now = self.clock()
        page, next_after = self.export_rows.list_exports(
            book_id, limit=size, start_after=start_after, now=now
        )
        return {
            "exports": [self.view(e, book=book, now=now) for e in page],
            "next_cursor": encode_cursor(next_after) if next_after else None,
        }

    def view(self, export: Export, *, book: Book | None, now: float) -> dict[str, Any]:
        """The export as a caller sees it. A link past its promise reads as expired, whether or not the GC
        has got to it, and a download URL is minted fresh on every read and never stored."""
        state = export.state
        if state == State.READY and export.expires_at is not None and now >= export.expires_at:
            state = State.EXPIRED
        body: dict[str, Any] = {
            "id": export.id,
            "book_id": export.book_id,
            "format": export.format,
            "options": export.options,
            "state": state.value,
            "requested_at": iso(export.requested_at),
            "started_at": iso(export.started_at),
            "finished_at": iso(export.finished_at),
            "expires_at": iso(export.expires_at),
            "attempt": export.attempt,
            "size_bytes": export.size_bytes,
            "sha256": export.sha256,
            "complete": export.complete,
            "failure_code": export.failure_code,
            "built_revision": export.built_revision,
            "download_url": None,
            "download_expires_at": None,
        }
        if book is not None:
            body["book_revision"] = book.revision
        if state == State.PENDING and export.progress_total:
            body["progress"] = {
                "chapters_done": export.progress_done or 0,
                "chapters_total": export.progress_total,
            }
        if export.skipped:
            body["skipped_chapters"] = list(export.skipped)  # the first SKIPPED_KEPT of them
            body["skipped_chapters_total"] = max(export.skipped_total, len(export.skipped))
        if export.missing:
            body["missing_images"] = list(export.missing)  # the first NOTES_KEPT of them
            body["missing_images_total"] = export.missing_total
        if export.warnings:
            body["warnings"] = list(export.warnings)
            body["warnings_total"] = export.warnings_total
        if state == State.READY and export.path and export.expires_at is not None and book is not None:
            # Valid until min(expires_at, now + 15 min), never later; whole seconds, rounded down.
            until = min(export.expires_at, now + self.settings.presign_max_seconds)
            seconds = int(until - now)
            if seconds >= 1:
                # From the format table: a poll imports no renderer and no markdown parser.
                fmt = engine.ZIP if export.package == "zip" else engine.FORMATS[export.format]
                body["download_name"] = download_name(book.title, fmt.extension)
                body["download_url"] = self.objects.presign_download(
                    export.path, body["download_name"], fmt.content_type, seconds
                )
                body["download_expires_at"] = iso(now + seconds)
        return body

    # ---- cancel ----------------------------------------------------------------------------------

    def cancel(self, caller: str, book_id: str, export_id: str) -> Cancel:
        """End the caller's export: a pending one is cancelled; a ready one's link ends now, and its bytes
        are deleted before the answer, so a URL handed out earlier stops working at once."""
        if not (valid_id(book_id) and valid_export_id(export_id)):
            raise not_found()
        now = self.clock()
        outcome = self.export_rows.cancel_export(book_id, export_id, caller, now)
        if isinstance(outcome, NotFound):
            raise not_found()
        after_ending(self.batch_rows, outcome.target, now)
        if isinstance(outcome, Revoked):
            self.purges.unlink_now(outcome)
            state_change(export_id, book_id, "export revoked")
            return Cancel.REVOKED
        if outcome.how == Cancel.CANCELLED:
            state_change(export_id, book_id, "export cancelled")
        return outcome.how
