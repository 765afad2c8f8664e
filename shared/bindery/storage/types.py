"""What the rest of the code sees of the table: small frozen types, and the outcomes of each write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bindery.images import Asset
from bindery.metadata import Metadata
from bindery.states import Cancel, ClaimRefusal, FailureCode, State

# A batch's bundle is an export row of this format, under the batch's id as its book: it is built, expired
# and unlinked as any export is, and counted in no cap (the service makes it; no caller asked for it).
BUNDLE = "bundle"


class Slot(NamedTuple):
    """A pending export's place: which row, whose live set it counts against, and (a batch's target) the
    batch whose counts its ending moves instead; or (a bundle) none of those."""

    book_id: str
    export_id: str
    counted_against: str
    batch_id: str | None = None
    bundle: bool = False
    # Whether the row took its place in the global cap and counts its bytes in its caller's usage: every
    # row since those limits were (it carries `caller_class`); a row from before them took neither.
    in_caps: bool = True


@dataclass(frozen=True)
class Book:
    """`cut` names one revision's immutable set of chapters and its text object; a new revision is a new
    cut, so a build that read one cut can never see a mix of two."""

    id: str
    owner: str
    title: str
    revision: int
    cut: str
    chapter_count: int
    manuscript_bytes: int
    created_at: float
    updated_at: float
    metadata: Metadata = field(default_factory=Metadata)
    assets: tuple[Asset, ...] = ()

    def asset(self, name: str) -> Asset | None:
        return next((a for a in self.assets if a.name == name), None)


@dataclass(frozen=True)
class Chapter:
    """A chapter's title and where its text lies in its cut's manuscript object."""

    ordinal: int
    title: str
    offset: int
    size_bytes: int
    # The SHA-256 of its text's bytes, from its cut's chapter list (`bindery.chapter_lists`); "" when read
    # from its items, which do not hold it.
    sha256: str = ""


@dataclass(frozen=True)
class Marker:
    """A book-level chore the GC owes: retire a cut, or purge a deleted book's exports."""

    book_id: str
    cut: str | None  # the cut to retire; None for a purge, or for an asset's object
    asset: str | None = None  # the object id of an asset's bytes to retire


@dataclass(frozen=True)
class Export:
    id: str
    book_id: str
    format: str
    state: State
    requested_at: float
    counted_against: str
    attempt: int = 0
    started_at: float | None = None
    lease_until: float | None = None
    finished_at: float | None = None
    expires_at: float | None = None
    path: str | None = None
    paths: frozenset[str] = frozenset()
    size_bytes: int | None = None
    complete: bool | None = None
    failure_code: str | None = None
    built_revision: int | None = None
    progress_done: int | None = None
    progress_total: int | None = None
    # Chapters the build could not render: [{"ordinal", "title", "reason"}], the first SKIPPED_KEPT of
    # skipped_total. Empty when complete.
    skipped: tuple[dict[str, Any], ...] = ()
    skipped_total: int = 0
    # Images the manuscript names that the revision has no asset for ({"chapter", "chapter_title",
    # "name"}), and warnings ({"code", "chapter", "name"}); the first NOTES_KEPT of each.
    missing: tuple[dict[str, Any], ...] = ()
    missing_total: int = 0
    warnings: tuple[dict[str, Any], ...] = ()
    warnings_total: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    sha256: str | None = None
    package: str | None = None
    batch_id: str | None = None
    caller_class: str | None = None

    @property
    def slot(self) -> Slot:
        bundle, in_caps = self.format == BUNDLE, self.caller_class is not None
        return Slot(self.book_id, self.id, self.counted_against, self.batch_id, bundle, in_caps)


@dataclass(frozen=True)
class Due:
    """A sweep candidate as the index saw it. The write re-checks every condition: GSIs lag."""

    slot: Slot  # which row, and the live set it counts against while pending
    state: State
    attempt: int
    due_at: float
    paths: frozenset[str]


# Outcomes of a submit.
@dataclass(frozen=True)
class Accepted:
    export: Export


@dataclass(frozen=True)
class Replayed:
    """The Idempotency-Key was seen before with the same request: here is the answer it got then."""

    response: dict[str, Any]


@dataclass(frozen=True)
class KeyReused:
    """The Idempotency-Key was seen before with a different request."""


@dataclass(frozen=True)
class OverCap:
    live_ids: tuple[str, ...]


@dataclass(frozen=True)
class OverBudget:
    """The caller's stored bytes are at or over its budget."""

    usage: int


@dataclass(frozen=True)
class ShardFull:
    """The global cap's shard this export's id named had no room; another shard may."""

    shard: int


@dataclass(frozen=True)
class NotFound:
    """No such book or export for this caller. A stranger's item reads exactly like a missing one."""


SubmitOutcome = Accepted | Replayed | KeyReused | OverCap | OverBudget | ShardFull | NotFound


class Target(NamedTuple):
    """One export of a batch, in the request's order."""

    export_id: str
    book_id: str
    format: str


@dataclass(frozen=True)
class Batch:
    id: str
    caller: str
    caller_class: str
    status: str
    targets: tuple[Target, ...]
    targets_done: int
    n_ready: int
    n_failed: int
    n_cancelled: int
    bytes: int
    created_at: float
    finished_at: float | None = None
    bundle_id: str | None = None  # the export row of its zip, once it ended with a target ready
    revoked_at: float | None = None  # when a cancel ended the links of a batch that had ended

    @property
    def targets_total(self) -> int:
        return len(self.targets)


@dataclass(frozen=True)
class TooManyBatches:
    live_ids: tuple[str, ...]


@dataclass(frozen=True)
class BatchCreated:
    batch_id: str


BatchOutcome = BatchCreated | Replayed | KeyReused | TooManyBatches | OverBudget | ShardFull


@dataclass(frozen=True)
class Holdings:
    """What a caller holds at once, as its live item says."""

    live_exports: int
    live_batches: int
    usage: int


class EndedTarget(NamedTuple):
    """A batch's target whose row has ended, by the write that says so or before it: its batch may have
    ended with it. Storage only reports it; the batch service settles the batch (`bindery.batches`)."""

    caller: str
    batch_id: str


@dataclass(frozen=True)
class Revoked:
    """A ready link ended now. Its row still names `paths`: the caller deletes them at once, so a URL
    handed out earlier stops working, and then forgets them; the GC's unlink is the backstop."""

    book_id: str
    export_id: str
    paths: frozenset[str]
    target: EndedTarget | None = None


@dataclass(frozen=True)
class Cancelled:
    """A cancel that ended no link: the export cancelled now (CANCELLED), or ended already (ENDED)."""

    how: Cancel
    target: EndedTarget | None = None


# A cancel in storage: Cancelled, a Revoked (the caller deletes its bytes), or NotFound.
CancelOutcome = Cancelled | Revoked | NotFound


@dataclass(frozen=True)
class Swept:
    """The stale sweep's ending: the code it failed the row with (None: not its to fail, it had moved on)."""

    code: FailureCode | None
    target: EndedTarget | None = None


# Outcomes of a claim.
@dataclass(frozen=True)
class Claimed:
    export: Export


@dataclass(frozen=True)
class ClaimRefused:
    reason: ClaimRefusal
    export: Export | None


# The events feed.
@dataclass(frozen=True)
class FeedEvent:
    seq: int
    id: str
    type: str
    recorded_at: float
    body: dict[str, Any]


@dataclass(frozen=True)
class Appended:
    """Where an event sits in its caller's feed; `new` is False when it was recorded before (a replay, or
    this very append's own earlier try whose answer was lost)."""

    seq: int
    new: bool


@dataclass(frozen=True)
class FeedPage:
    """The events after the cursor, the feed's head when it was read, and the cursor to pass next (never
    below the one passed)."""

    events: tuple[FeedEvent, ...]
    head: int
    next: int


class CursorAhead(Exception):
    """A cursor past the feed's head (or below zero): no read of this feed handed it out."""

    def __init__(self, after: int, head: int):
        super().__init__(f"cursor {after} is past the feed's head {head}")
        self.after, self.head = after, head


class CursorGone(Exception):
    """The events right after the cursor are no longer kept (TTL removed them); `oldest` is the oldest
    cursor from which the feed still reads without a gap."""

    def __init__(self, after: int, oldest: int):
        super().__init__(f"events after {after} are no longer kept; the oldest cursor kept is {oldest}")
        self.after, self.oldest = after, oldest


# Webhooks.
@dataclass(frozen=True)
class Secret:
    key: str  # whsec_<base64>
    not_after: float | None  # None: the current one; else it signs beside it until then


@dataclass(frozen=True)
class Endpoint:
    id: str
    caller: str
    url: str
    events: frozenset[str]
    description: str
    secrets: tuple[Secret, ...]
    enabled: bool
    disabled_at: float | None
    disabled_reason: str | None
    fails_in_row: int
    created_at: float
    updated_at: float
    counts: dict[str, int]
    deleted: bool = False


@dataclass(frozen=True)
class Attempt:
    n: int
    at: float
    status: int | None
    error: str | None
    latency_ms: int
    redelivery: bool = False


@dataclass(frozen=True)
class Delivery:
    endpoint_id: str
    seq: int
    event_id: str
    type: str
    caller: str
    book_id: str | None
    body: dict[str, Any]
    state: str
    attempt: int
    budget: int
    redeliveries: int
    attempts: tuple[Attempt, ...]
    lease_until: float | None
    created_at: float
    window_ends: float
    due_at: float | None


@dataclass(frozen=True)
class EndpointOverCap:
    count: int
