"""Caller classes and what each may hold at once; and the service's one cap over all callers.

A caller's class is the verified JWT's `bindery_class` claim (`standard` when there is none). Each class has
its own caps, from :data:`DEFAULTS` and `BINDERY_CLASS_LIMITS` (JSON, a class's fields over its defaults):

    live_exports          single exports pending at once (the caller's live set)
    live_batches          batches not yet ended at once
    batch_targets         exports in one batch
    storage_bytes         bytes of the caller's published files still stored (its budget)
    pdf_manuscript_bytes  the largest manuscript it may export as pdf

`restricted` is held to the tightest: each of its caps is the smallest any class has, whatever the
configuration says, so a configuration can never make a restricted caller freer than another.

The global cap on live exports (`BINDERY_MAX_LIVE_EXPORTS_TOTAL`) is split over CAP_SHARDS counter items, so
no one item takes every submit's write (:func:`shard_caps`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

CLASS_CLAIM = "bindery_class"
# One hex digit of an export's id names its shard (`bindery.ids.new_id`): 16 shards.
CAP_SHARDS = 16
# A batch is created in ONE TransactWriteItems of at most 100 items: its row, its Idempotency-Key, the
# caller's live item, one put per target and one update per cap shard it takes (at most MAX_BATCH_SHARDS).
MAX_BATCH_SHARDS = 7
MAX_BATCH_TARGETS = 100 - 3 - MAX_BATCH_SHARDS
MiB, GiB = 1024 * 1024, 1024 * 1024 * 1024


class CallerClass(StrEnum):
    STANDARD = "standard"
    FLEET = "fleet"
    RESTRICTED = "restricted"


@dataclass(frozen=True)
class Limits:
    live_exports: int
    live_batches: int
    batch_targets: int
    storage_bytes: int
    pdf_manuscript_bytes: int

    def view(self) -> dict[str, int]:
        return asdict(self)


DEFAULTS = {
    CallerClass.STANDARD: Limits(
        live_exports=10,
        live_batches=5,
        batch_targets=50,
        storage_bytes=1 * GiB,
        pdf_manuscript_bytes=20 * MiB,
    ),
    CallerClass.FLEET: Limits(
        live_exports=100,
        live_batches=20,
        batch_targets=MAX_BATCH_TARGETS,
        storage_bytes=50 * GiB,
        pdf_manuscript_bytes=50 * MiB,
    ),
    CallerClass.RESTRICTED: Limits(
        live_exports=2,
        live_batches=1,
        batch_targets=10,
        storage_bytes=100 * MiB,
        pdf_manuscript_bytes=2 * MiB,
    ),
}


class LimitsError(ValueError):
    """BINDERY_CLASS_LIMITS is present but unusable; the message names what."""


def class_limits(overrides: str, standard_live_exports: int) -> dict[CallerClass, Limits]:
    """Each class's caps: the defaults, `BINDERY_MAX_LIVE_EXPORTS` for standard's live exports, then the
    JSON overrides; and restricted clamped to the tightest of all."""
    table = dict(DEFAULTS)
    table[CallerClass.STANDARD] = replace(table[CallerClass.STANDARD], live_exports=standard_live_exports)
    if overrides:
        try:
            given: Any = json.loads(overrides)
        except ValueError as exc:
            raise LimitsError(f"BINDERY_CLASS_LIMITS is not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise LimitsError('BINDERY_CLASS_LIMITS must be an object: {"fleet": {"live_exports": 200}}')
        names = {f.name for f in fields(Limits)}
        for name, values in given.items():
            if name not in CallerClass.__members__.values():
                raise LimitsError(f"BINDERY_CLASS_LIMITS names an unknown class {name!r}")
            if not isinstance(values, dict) or set(values) - names:
                raise LimitsError(f"BINDERY_CLASS_LIMITS[{name!r}] may set only: {', '.join(sorted(names))}")
            for field, value in values.items():
                if type(value) is not int or value < 1:
                    raise LimitsError(f"BINDERY_CLASS_LIMITS[{name!r}].{field} must be a whole number >= 1")
            table[CallerClass(name)] = replace(table[CallerClass(name)], **values)
    if any(limits.batch_targets > MAX_BATCH_TARGETS for limits in table.values()):
        raise LimitsError(f"batch_targets may be at most {MAX_BATCH_TARGETS} (one transaction per batch)")
    tightest = {f.name: min(getattr(limits, f.name) for limits in table.values()) for f in fields(Limits)}
    table[CallerClass.RESTRICTED] = Limits(**tightest)
    return table


def caller_class(claims: dict[str, Any]) -> CallerClass:
    """The class a verified token names. An unknown name is held to restricted, not let off as standard:
    a misspelt claim must never be worth more than the right one."""
    raw = claims.get(CLASS_CLAIM)
    if raw is None or raw == "":
        return CallerClass.STANDARD
    try:
        return CallerClass(raw)
    except ValueError:
        return CallerClass.RESTRICTED


def shard_caps(total: int) -> tuple[int, ...]:
    """The global cap split over the shards, the remainder on the first ones: the caps sum to `total`
    exactly, so shards that each stay under their own cap keep the service under its one."""
    base, extra = divmod(total, CAP_SHARDS)
    return tuple(base + (1 if k < extra else 0) for k in range(CAP_SHARDS))


def shard_of(export_id: str) -> int:
    """The shard an export's live slot is counted in: its id's last hex digit, chosen at submit."""
    return int(export_id[-1], 16)
