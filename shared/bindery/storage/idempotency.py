"""Idempotency-Keys: taken in the same transaction as the write they guard, and read back from its refusal.

A key is the caller's own (its digest is scoped to the caller), and it is one item: taking it is a put
that only an absent or lapsed key allows, so of two requests with one key, one write wins and the other
learns from the refusal what the winner was answered.
"""

from __future__ import annotations

import json
from typing import Any

from bindery.storage.conditions import (
    Tx,
    TxRefused,
)
from bindery.storage.table import (
    IdemItem,
    Rows,
)
from bindery.storage.types import KeyReused, Replayed


class KeyRows(Rows):
    def take_key(
        self, tx: Tx, key: tuple[str, str], response: dict[str, Any], now: float, export_id: str = ""
    ) -> None:
        """Add to `tx` the put that takes the key, by the name "key", keeping the answer a replay gets.
        `key` is (the key's digest, the request's hash); `export_id` is the export it made, if any."""
        digest, request_hash = key
        item = self.models.idem(
            f"IDEM#{digest}",
            "IDEM",
            export_id=export_id,
            request_hash=request_hash,
            response=json.dumps(response, separators=(",", ":")),
            ttl=now + self.settings.idempotency_ttl_seconds,
        )
        # A key past its TTL is a key never seen: TTL deletes days late.
        tx.put("key", item, IdemItem.pk.does_not_exist() | (IdemItem.ttl <= now), old=True)


def key_seen(refused: TxRefused, idempotency: tuple[str, str] | None) -> Replayed | KeyReused | None:
    """What a refused transaction says of its key: taken before for this very request (Replayed, with the
    answer it got then), taken for another (KeyReused), or not why it was refused (None)."""
    old = refused.old(IdemItem, "key") if idempotency is not None else None
    if idempotency is None or old is None:
        return None
    if old.request_hash != idempotency[1]:
        return KeyReused()
    return Replayed(json.loads(old.response))
