"""The schedules' rows: the sparse `by_due` queues (expire, unlink, stale), the orphan cursor, and the
GC's audit rows.

A sweep reads its queue from the index, which lags, so every write re-checks in its condition what the
index showed; and each write recognises its own earlier try, applied with its answer lost.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from bindery.config import Settings
from bindery.faults import item_or_none, translate_faults
from bindery.states import FailureCode, Queue, State
from bindery.storage import steps
from bindery.storage.conditions import ItemRefused, put_if
from bindery.storage.endings import LifecycleRows
from bindery.storage.lifecycle import Applied, ended_target
from bindery.storage.table import (
    AUDIT_PK,
    CURSOR_PK,
    ByDue,
    CursorItem,
    Models,
    Rows,
    book_pk,
    expired_ttl,
    export_sk,
)
from bindery.storage.types import Due, Slot, Swept

AUDIT_RETENTION_SECONDS = 90 * 86_400


@translate_faults
class SweepRows(Rows):
    def __init__(self, settings: Settings, models: Models, lifecycle: LifecycleRows):
        super().__init__(settings, models)
        self.lifecycle = lifecycle

    def due(self, queue: Queue, now: float, limit: int) -> list[Due]:
        """Rows waiting in `queue` whose time has come; the sparse index holds only waiting rows."""
        found = []
        for item in self.models.export.by_due.query(queue.value, ByDue.due_at <= now, limit=limit):
            found.append(
                Due(
                    slot=Slot(item.book_id, item.export_id, item.counted_against),
                    state=State(item.state),
                    attempt=int(item.attempt or 0),
                    due_at=item.due_at,
                    paths=frozenset(item.paths or ()),
                )
            )
        return found

    def expire_link(self, due: Due, now: float) -> bool:
        """ready -> expired: the link stops working when it was promised to, and the ROW says so.

        `path` is KEPT. Clearing it in the same write would make the unlink a one-shot act: a failed delete
        would leave bytes no row could ever name again. :meth:`forget_paths` drops it after the unlink.
        """
        return isinstance(self.lifecycle.transition(steps.expire(due.slot, now)), Applied)

    def forget_paths(self, book_id: str, export_id: str, now: float) -> bool:
        """The bytes are gone; the row stops naming them and may now be deleted by TTL, 30 days on. The
        bytes a finish published leave their caller's usage in the same write, so usage is always the
        bytes still stored: not one run of the GC sooner (a failed delete keeps them counted), nor later.

        Only after the unlink, or the retry of a failed unlink would have nothing left to find.
        """
        # The one read: which caller's usage the published bytes count in, and how many. Neither
        # changes once the row has ended, and the write's condition holds the row to that.
        seen = item_or_none(
            lambda: self.models.export.get(book_pk(book_id), export_sk(export_id), consistent_read=True)
        )
        if seen is None:
            return False
        # What a finish added to the usage: the bytes it published, if the row counts them (a row from before
        # the budget has no `caller_class`, and its finish added nothing).
        published = int(seen.size_bytes or 0) if seen.path and seen.caller_class is not None else 0
        ttl = now + self.settings.ended_retention_seconds
        step = steps.forget(
            Slot(book_id, export_id, seen.counted_against),
            had_path=bool(seen.path),
            published=published,
            ttl=ttl,
        )
        return isinstance(self.lifecycle.transition(step), Applied)

    def fail_stale(self, due: Due, now: float) -> Swept:
        """FailStalePendingExports (docs/ARCHITECTURE.md), with its two clocks kept in one attribute
        (`steps.sweep`). The code is chosen from what the index showed, and the write's `attempt = seen`
        pins it."""
        code = FailureCode.WORKER_LOST if due.attempt > 0 else FailureCode.QUEUE_TIMEOUT
        outcome = self.lifecycle.transition(steps.sweep(due.slot, due.attempt, code, now))
        return Swept(code if isinstance(outcome, Applied) else None, ended_target(outcome))

    def orphan_cursor(self) -> tuple[int, str]:
        """(pass, key): the reconciliation resumes after `key` in pass `pass` (0, "" before any run)."""
        item = item_or_none(lambda: self.models.cursor.get(CURSOR_PK, "CURSOR", consistent_read=True))
        return (0, "") if item is None else (int(item.pass_no), item.after)

    def set_orphan_cursor(self, pass_no: int, after: str) -> bool:
        """Record how far a run read. A position at or before the recorded one is left alone (a cursor
        only moves forward): a run that resumed from an older read, or two overlapping runs, must never walk
        the cursor backwards and make the next run repeat work it thinks is new. False: left alone."""
        newer = (
            CursorItem.pk.does_not_exist()
            | (CursorItem.pass_no < pass_no)
            | ((CursorItem.pass_no == pass_no) & (CursorItem.after < after))
        )
        try:
            put_if(self.models.cursor(CURSOR_PK, "CURSOR", pass_no=pass_no, after=after), newer)
        except ItemRefused:
            # Also what a resend of this very write gets, once its first try was applied and its answer
            # lost: the position is then the recorded one, which is what this write meant; no caller acts
            # on the False.
            return False
        return True

    def named_artifacts(self, keys: Sequence[str], now: float) -> set[str]:
        """Which of these artifact keys a live row still names (ready, pending, or ended and waiting for its
        unlink). One BatchGetItem per 100 keys; a row past its TTL names nothing."""
        wanted: dict[tuple[str, str], list[str]] = {}
        for key in keys:
            parts = key.split("/")
            if len(parts) == 4:
                wanted.setdefault((book_pk(parts[1]), export_sk(parts[2])), []).append(key)
        named: set[str] = set()
        for item in self.models.export.batch_get(list(wanted)):
            if expired_ttl(item.ttl, now):
                continue
            names = set(item.paths or ()) | ({item.path} if item.path else set())
            named |= names & set(wanted[(item.pk, item.sk)])
        return named

    def record_audit(self, counts: dict[str, Any], now: float) -> None:
        self.models.audit(
            AUDIT_PK,
            f"{now:017.6f}#{uuid.uuid4().hex[:8]}",
            ran_at=now,
            counts=json.dumps(counts, sort_keys=True),
            ttl=now + AUDIT_RETENTION_SECONDS,
        ).save()

    def audits(self, limit: int) -> list[dict[str, Any]]:
        """The last `limit` GC runs, newest first."""
        return [
            {"ran_at": item.ran_at, **json.loads(item.counts)}
            for item in self.models.audit.query(AUDIT_PK, scan_index_forward=False, limit=limit)
        ]
