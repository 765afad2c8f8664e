"""A caller's webhook endpoints: registered under a cap, read only by their caller, changed and deleted only
while active, and their secrets rotated so that two rotations cannot both become the current one.

Every write here is conditional, and each one recognises its own earlier try whose answer was lost: the
endpoint's id and its secret are chosen before the first try, so a resend that finds them already there
finds its own write.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable
from typing import Any

from pynamodb.expressions.condition import size

from bindery.faults import item_or_none, translate_faults
from bindery.states import Queue
from bindery.storage.conditions import (
    ItemRefused,
    Tx,
    update_if,
)
from bindery.storage.hookmodels import (
    DELIVERY_STATES,
    HOOKS_SK,
    EndpointItem,
    HookRows,
    HookSetItem,
    caller_pk,
    endpoint_sk,
)
from bindery.storage.types import Endpoint, EndpointOverCap, Secret

ACTIVE, DELETED = "active", "deleted"


@translate_faults
class EndpointRows(HookRows):
    def register_endpoint(self, endpoint: Endpoint) -> Endpoint | EndpointOverCap:
        """Add the endpoint to its caller's set and write it, in one transaction, unless the set is full."""
        cap = self.settings.max_webhooks
        tx = Tx()
        tx.update(
            "hooks",
            self.feed_models.hooks(caller_pk(endpoint.caller), HOOKS_SK),
            [HookSetItem.hook_ids.add({endpoint.id})],
            # Two registrations at cap - 1 cannot both pass: each reads the size its own write will grow,
            # and DynamoDB serialises the two.
            HookSetItem.hook_ids.does_not_exist() | (size(HookSetItem.hook_ids) < cap),
            old=True,
        )
        tx.put(
            "endpoint",
            self._endpoint_item(endpoint),
            # A new id: only this very registration's resend, its answer lost, can find it there.
            EndpointItem.pk.does_not_exist(),
            old=True,
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return endpoint
        mine = refused.old(self.feed_models.endpoint, "endpoint")
        if mine is not None and mine.secrets == self._endpoint_item(endpoint).secrets:
            return _to_endpoint(mine)  # our own try, applied: the resend found it
        old = refused.old(self.feed_models.hooks, "hooks")
        return EndpointOverCap(len(old.hook_ids or ()) if old is not None else cap)

    def read_endpoint(self, caller: str, endpoint_id: str) -> Endpoint | None:
        """The caller's endpoint, or None: another caller's id is looked up under this caller's key, so it
        is simply not there, exactly as a missing one."""
        key = caller_pk(caller), endpoint_sk(endpoint_id)
        item = item_or_none(lambda: self.feed_models.endpoint.get(*key, consistent_read=True))
        return None if item is None or item.state != ACTIVE else _to_endpoint(item)

    def list_endpoints(self, caller: str, limit: int, after: str | None) -> tuple[list[Endpoint], str | None]:
        """The caller's active endpoints, oldest first (ids are time-ordered), a page at a time: one more
        than the page is read, so a last page says it is the last."""
        start = {"pk": {"S": caller_pk(caller)}, "sk": {"S": endpoint_sk(after)}} if after else None
        found: list[Endpoint] = []
        for item in self.feed_models.endpoint.query(
            caller_pk(caller),
            EndpointItem.sk.startswith("HOOK#"),
            filter_condition=EndpointItem.state == ACTIVE,
            last_evaluated_key=start,
            consistent_read=True,
        ):
            found.append(_to_endpoint(item))
            if len(found) > limit:
                return found[:limit], found[limit - 1].id
        return found, None

    def patch_endpoint(
        self, caller: str, endpoint_id: str, changes: dict[str, Any], now: float
    ) -> Endpoint | None:
        """Change url, events, description, or enable it again; None if it is not the caller's, or deleted."""
        actions: list[Any] = [EndpointItem.updated_at.set(now)]
        if "url" in changes:
            actions.append(EndpointItem.url.set(changes["url"]))
        if "events" in changes:
            actions.append(EndpointItem.events.set(set(changes["events"])))
        if "description" in changes:
            actions.append(EndpointItem.description.set(changes["description"]))
        if changes.get("enabled") is True:
            # Re-enabled: its run of failures starts again from none.
            actions += [
                EndpointItem.enabled.set(1),
                EndpointItem.fails_in_row.set(0),
                EndpointItem.disabled_at.remove(),
                EndpointItem.disabled_reason.remove(),
            ]
        elif changes.get("enabled") is False:
            actions += [
                EndpointItem.enabled.set(0),
                EndpointItem.disabled_at.set(now),
                EndpointItem.disabled_reason.set("disabled_by_caller"),
            ]
        try:
            item = update_if(
                self.client,
                self.feed_models.endpoint,
                caller_pk(caller),
                endpoint_sk(endpoint_id),
                actions,
                # No resurrection: a PATCH racing a DELETE cannot bring the endpoint back. The same
                # PATCH resent after its answer was lost sets the same values again.
                EndpointItem.state == ACTIVE,
            )
        except ItemRefused:
            return None
        return _to_endpoint(item)

    def delete_endpoint(self, caller: str, endpoint_id: str, now: float) -> bool:
        """Tombstone the endpoint, free its place under the cap, and queue its waiting deliveries to be
        withdrawn, in one transaction. False if it was not the caller's active endpoint."""
        token = uuid.uuid4().hex
        tx = Tx()
        tx.update(
            "endpoint",
            self.feed_models.endpoint(caller_pk(caller), endpoint_sk(endpoint_id)),
            [
                EndpointItem.state.set(DELETED),
                EndpointItem.deleted_by.set(token),
                EndpointItem.updated_at.set(now),
                EndpointItem.queue.set(Queue.WITHDRAW.value),
                EndpointItem.due_at.set(now),
            ],
            # Deleted once: a second DELETE, or this one's resend, frees no second place in the set.
            EndpointItem.state == ACTIVE,
            old=True,
        )
        tx.update(
            "hooks",
            self.feed_models.hooks(caller_pk(caller), HOOKS_SK),
            [HookSetItem.hook_ids.delete({endpoint_id})],
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return True
        old = refused.old(self.feed_models.endpoint, "endpoint")
        # Our own resend, its answer lost, finds it deleted by the token it wrote; any other DELETE is a
        # second one, of an endpoint already gone.
        return old is not None and old.deleted_by == token

    def rotate_secret(self, endpoint: Endpoint, new_key: str, now: float) -> Endpoint | None:
        """Make `new_key` the current secret; the one it replaces keeps signing beside it for the overlap.
        None if the endpoint is gone, or another rotation won since `endpoint` was read."""
        overlap = self.settings.webhook_secret_overlap_seconds
        # The current secret signs on for the overlap, and one still in its own overlap keeps it: a second
        # rotation does not cut short the first one's promise.
        kept = [Secret(new_key, None)]
        kept += [Secret(s.key, now + overlap) for s in endpoint.secrets if s.not_after is None]
        kept += [s for s in endpoint.secrets if s.not_after is not None and s.not_after > now]
        item = self.feed_models.endpoint(caller_pk(endpoint.caller), endpoint_sk(endpoint.id))
        try:
            updated = update_if(
                self.client,
                self.feed_models.endpoint,
                item.pk,
                item.sk,
                [EndpointItem.secrets.set(_secrets_json(kept)), EndpointItem.updated_at.set(now)],
                # Two rotations from the same secrets cannot both become current: the loser's view of
                # the secrets is no longer what is stored.
                (EndpointItem.secrets == _secrets_json(endpoint.secrets)) & (EndpointItem.state == ACTIVE),
            )
        except ItemRefused as refused:
            old = refused.old
            if old is not None and old.secrets == _secrets_json(kept):
                return _to_endpoint(old)  # our own rotation, applied, its answer lost
            return None
        return _to_endpoint(updated)

    def endpoints_of(self, caller: str) -> list[Endpoint]:
        """Every active endpoint of the caller (at most the cap), read consistently."""
        return [
            _to_endpoint(item)
            for item in self.feed_models.endpoint.query(
                caller_pk(caller),
                EndpointItem.sk.startswith("HOOK#"),
                filter_condition=EndpointItem.state == ACTIVE,
                consistent_read=True,
            )
        ]

    def disable_if_failing(
        self, caller: str, endpoint_id: str, after: int, reason: str | None, now: float
    ) -> bool:
        """Disable the endpoint once its run of failures reaches `after`, or now, for `reason` (a 410).

        A write of its own, after the attempt's record has counted the failure: conditioned on the count
        the table holds, so two failures recorded at once cannot both miss the threshold."""
        enabled = (EndpointItem.state == ACTIVE) & (EndpointItem.enabled == 1)
        try:
            update_if(
                self.client,
                self.feed_models.endpoint,
                caller_pk(caller),
                endpoint_sk(endpoint_id),
                [
                    EndpointItem.enabled.set(0),
                    EndpointItem.disabled_at.set(now),
                    EndpointItem.disabled_reason.set(reason or f"{after}_consecutive_failures"),
                ],
                enabled if reason else enabled & (EndpointItem.fails_in_row >= after),
            )
        except ItemRefused:
            return False
        return True

    def endpoints_to_withdraw(self, now: float, limit: int) -> list[tuple[str, str]]:
        """(caller, endpoint) of deleted endpoints whose waiting deliveries are still to be withdrawn: the
        index holds their keys, which is all the withdrawal needs."""
        due = self.feed_models.endpoint.by_due.query(
            Queue.WITHDRAW.value, EndpointItem.due_at <= now, limit=limit
        )
        return [(item.pk.removeprefix("CALLER#"), item.sk.removeprefix("HOOK#")) for item in due]

    def finish_withdraw(self, caller: str, endpoint_id: str, now: float) -> bool:
        """The deleted endpoint leaves the withdraw queue once nothing of it waits or is in flight; its
        tombstone (and its counts) go 30 days on. Otherwise it is looked at again after a lease."""
        pk, sk = caller_pk(caller), endpoint_sk(endpoint_id)
        try:
            update_if(
                self.client,
                self.feed_models.endpoint,
                pk,
                sk,
                [
                    EndpointItem.queue.remove(),
                    EndpointItem.due_at.remove(),
                    EndpointItem.ttl.set(now + self.settings.ended_retention_seconds),
                ],
                # An attempt in flight may yet queue its delivery again: wait for it to be recorded.
                (EndpointItem.state == DELETED)
                & (EndpointItem.n_queued == 0)
                & (EndpointItem.n_in_flight == 0),
            )
        except ItemRefused:
            later = now + self.settings.webhook_lease_seconds
            with contextlib.suppress(ItemRefused):
                update_if(
                    self.client,
                    self.feed_models.endpoint,
                    pk,
                    sk,
                    [EndpointItem.due_at.set(later)],
                    EndpointItem.state == DELETED,
                )
            return False
        return True

    def _endpoint_item(self, endpoint: Endpoint) -> EndpointItem:
        return self.feed_models.endpoint(
            caller_pk(endpoint.caller),
            endpoint_sk(endpoint.id),
            endpoint_id=endpoint.id,
            url=endpoint.url,
            events=set(endpoint.events),
            description=endpoint.description,
            secrets=_secrets_json(endpoint.secrets),
            state=ACTIVE,
            enabled=1,
            fails_in_row=0,
            created_at=endpoint.created_at,
            updated_at=endpoint.updated_at,
        )


def _secrets_json(secrets: Iterable[Secret]) -> str:
    return json.dumps([{"key": s.key, "not_after": s.not_after} for s in secrets], separators=(",", ":"))


def _to_endpoint(item: EndpointItem) -> Endpoint:
    return Endpoint(
        id=item.endpoint_id,
        caller=item.pk.removeprefix("CALLER#"),
        url=item.url,
        events=frozenset(item.events or ()),
        description=item.description or "",
        secrets=tuple(Secret(s["key"], s["not_after"]) for s in json.loads(item.secrets)),
        enabled=bool(item.enabled),
        disabled_at=item.disabled_at,
        disabled_reason=item.disabled_reason,
        fails_in_row=int(item.fails_in_row or 0),
        created_at=item.created_at,
        updated_at=item.updated_at,
        counts={state: int(getattr(item, f"n_{state}") or 0) for state in DELIVERY_STATES},
        deleted=item.state == DELETED,
    )
