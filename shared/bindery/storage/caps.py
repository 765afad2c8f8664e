"""The conditions that hold the caps: what a submit or a batch adds, checked in the same write that adds it.

A cap checked by a read and then a write is a cap two writers can both pass. Each one here is a condition on
the very item that counts what it caps, so of concurrent writers only those it has room for commit.
"""

from __future__ import annotations

from typing import Any

from bindery.config import Settings
from bindery.limits import Limits
from bindery.storage.conditions import (
    Tx,
)
from bindery.storage.table import (
    CAP_PK,
    LiveItem,
    Models,
    ShardItem,
    shard_sk,
)


def under_budget(limits: Limits) -> Any:
    """The caller stores fewer bytes than its budget. At or over it, nothing new may start; what is already
    building still finishes, so the overshoot is at most what was in flight when the budget was reached."""
    return LiveItem.usage.does_not_exist() | (LiveItem.usage < limits.storage_bytes)


def take_shards(tx: Tx, models: Models, settings: Settings, taken: dict[int, int]) -> None:
    """Add to `tx` one update per shard, each taking `taken[k]` live slots of the global cap under the
    condition that the shard has them: `n + taken <= its cap`. The shards' caps sum to the global cap, so
    no interleaving of submits can put the service over it. The names are "shard" for one shard, else
    "shard:<k>"."""
    caps = settings.shard_caps
    for k, count in taken.items():
        room = caps[k] - count
        condition = ShardItem.n <= room
        if room >= 0:
            condition = ShardItem.n.does_not_exist() | condition
        name = "shard" if len(taken) == 1 else f"shard:{k}"
        tx.update(name, models.shard(CAP_PK, shard_sk(k)), [ShardItem.n.add(count)], condition)


def shard_refused(refused: Any) -> bool:
    return any(name.startswith("shard") and refused.failed(name) for name in refused.reasons)
