"""The twelve promises, checked against what is in the table and the bucket once the system is quiescent.

1. Every accepted export has a row, and has ended (ready, failed, cancelled or expired), a failed one
   with its code.
2. Every ready export's object exists; every object under artifacts/ is named by a row that is ready or
   still waiting for its unlink; every manuscript and image under books/ is its book's current cut or
   one of its current images, or one waiting to be retired; every cached piece (books/pieces/) is of a book
   that exists (or waits for its purge); after the GC nothing else remains, and no multipart upload is
   left open.
3. Each caller's live set is exactly that caller's pending exports.
4. No Idempotency-Key answered with two different exports, and the table holds at most one export per
   key and window (its rows carry the key's digest).
5. A poll made no write.
6. Every event in a caller's feed reached each endpoint that subscribed to it (enabled, and registered
   before it happened) as exactly one delivery, and every delivery has ended: acked, or rejected, expired
   or withdrawn, the documented endings. None is left queued or in flight.
7. Each endpoint's ledger counts equal its delivery rows, state by state.
8. Each caller's feed holds exactly the events 1..head, and each event id is in it once.
9. A batch's counts equal its targets' endings (targets_done, each ending's count, its bytes); a batch is
   running exactly while one of its targets is pending (or until the sweep settles it), and exactly the
   running ones hold a place among their caller's live batches.
10. A caller's usage equals the bytes of its published files still stored.
11. No cap is over: each shard of the global cap counts exactly its pending exports, within its cap; no
    caller holds more live exports than its class allows.
12. Each book is on its owner's shelf (GET /books) exactly once, and the shelf names no book that is gone.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from bindery import images
from bindery.objects import ARTIFACT_PREFIX, BOOK_PREFIX, PIECES_PREFIX, UPLOAD_PREFIX
from bindery.piece_cache import CURSOR_KEY
from bindery.states import ENDED, Queue, State
from bindery.storage import BUNDLE
from bindery.storage.hookmodels import DELIVERY_STATES

# What the checks read of each item: one projected Scan, so that checking after every step stays cheap.
_PROJECTION = (
    "pk, sk, export_id, #state, failure_code, #path, paths, #queue, counted_against, live_ids, cut,"
    " key_digest, requested_at, revision, assets, batch_id, #format, #owner"
)
_NAMES = {"#state": "state", "#path": "path", "#queue": "queue", "#format": "format", "#owner": "owner"}


_FIELDS = frozenset(f.strip().lstrip("#") for f in _PROJECTION.split(","))
_KEPT_PREFIXES, _KEPT_SK = ("EXPORT#", "RETIRE#", "BATCH#", "SHELF#"), ("LIVE", "BOOK", "PURGE")


def _in_process_moto(client: Any) -> bool:
    """Whether this client's calls are answered by moto in this process (no endpoint of its own)."""
    return "amazonaws.com" in client.meta.endpoint_url


def _moto_items(name: str, region: str) -> list[dict[str, Any]]:
    """The same items as the Scan below, read from moto's own table. Under moto in-process (the fault
    matrix, the stateful test) a Scan costs moto its filter and its serialisation, per item, every step:
    two fifths of the stateful test's time went to checking."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    plain = TypeDeserializer()
    found = []
    for item in _moto_table_items(dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(name)):
        sk = item.range_key.value if item.range_key is not None else ""
        if sk.startswith(_KEPT_PREFIXES) or sk in _KEPT_SK:
            attributes = item.to_json()["Attributes"]
            found.append({k: plain.deserialize(v) for k, v in attributes.items() if k in _FIELDS})
    return found


def _moto_table_items(table: Any) -> list[Any]:
    """moto's items in key order, as its `all_items()` returns them, but sorted by the keys' plain strings:
    `all_items()` sorts by its typed values, whose every comparison casts both sides (after every step of
    the stateful test, that sort was most of the check's read). Bindery's keys are strings, so the order
    is the same."""
    items = [item for by_range in table.items.values() for item in by_range.values()]
    return sorted(items, key=lambda item: (item.hash_key.value, item.range_key.value))


def items_of(store: Any) -> list[dict[str, Any]]:
    if _in_process_moto(store.client):
        return _moto_items(store.settings.table, store.settings.region)
    plain = TypeDeserializer()
    kwargs: dict[str, Any] = {
        "TableName": store.settings.table,
        "ConsistentRead": True,
        "ProjectionExpression": _PROJECTION,
        "ExpressionAttributeNames": _NAMES,
        # Exports, live sets, books and their retire and purge markers: moto's cost is in serialising what
        # it returns, and chapters, keys and audit rows are most of a table.
        "FilterExpression": (
            "begins_with(sk, :export) OR sk IN (:live, :book, :purge) OR begins_with(sk, :retire)"
            " OR begins_with(sk, :batch) OR begins_with(sk, :shelf)"
        ),
        "ExpressionAttributeValues": {
            ":export": {"S": "EXPORT#"},
            ":batch": {"S": "BATCH#"},
            ":shelf": {"S": "SHELF#"},
            ":live": {"S": "LIVE"},
            ":book": {"S": "BOOK"},
            ":purge": {"S": "PURGE"},
            ":retire": {"S": "RETIRE#"},
        },
    }
    found = []
    while True:
        page = store.client.scan(**kwargs)
        found += [{k: plain.deserialize(v) for k, v in item.items()} for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def keys_of(objects: Any, prefix: str) -> list[str]:
    """The bucket's keys under `prefix`; from moto's own bucket when moto answers in this process."""
    if not _in_process_moto(objects.client):
        return list(objects.keys(prefix))
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets[objects.settings.bucket]
    return sorted(key for key in bucket.keys if key.startswith(prefix))


def violations(
    store: Any,
    objects: Any,
    *,
    key_answers: dict[str, set[str]] | None = None,
    poll_writes: list[str] | None = None,
    accepted: set[str] | None = None,
    after_gc: bool = True,
) -> list[str]:
    found: list[str] = []
    items = items_of(store)
    rows = [i for i in items if i["sk"].startswith("EXPORT#")]

    # 1. an accepted export has a row (it is never forgotten before its answer could matter)
    for export_id in sorted((accepted or set()) - {r["export_id"] for r in rows}):
        found.append(f"1: accepted export {export_id} has no row")

    # 1. ended, with a reason
    for row in rows:
        if row["state"] == State.PENDING.value:
            found.append(f"1: export {row['export_id']} is still pending")
        if row["state"] == State.FAILED.value and not row.get("failure_code"):
            found.append(f"1: export {row['export_id']} failed without a code")

    # 2. bytes and rows agree
    bucket_keys = set(keys_of(objects, ARTIFACT_PREFIX))
    named: set[str] = set()
    for row in rows:
        if row["state"] == State.READY.value and (not row.get("path") or row["path"] not in bucket_keys):
            found.append(f"2: ready export {row['export_id']} has no object ({row.get('path')})")
        # A row names every key any of its attempts may have written (`paths`): a ready row keeps a dead
        # attempt's key until its link lapses and the unlink takes them all; an ended row until its unlink.
        waiting = row.get("queue") == Queue.UNLINK.value and State(row["state"]) in ENDED
        if waiting or row["state"] in (State.PENDING.value, State.READY.value):
            named |= set(row.get("paths") or ())
    for key in sorted(bucket_keys - named):
        found.append(f"2: object {key} is named by no row that could still need it")
    if after_gc:
        for row in rows:
            if State(row["state"]) in ENDED and row.get("queue") == Queue.UNLINK.value:
                found.append(
                    f"2: ended export {row['export_id']} still waits for its unlink after the GC ran"
                )
    # ...and under books/: each manuscript (and its chapter list) is its book's current cut, or a cut waiting
    # to be retired; each image is one its book's revision names, or one waiting to be retired
    books = {i["pk"].removeprefix("BOOK#"): i.get("cut") for i in items if i["sk"] == "BOOK"}
    named_images = {
        (i["pk"].removeprefix("BOOK#"), f"assets/{asset.object_id}")
        for i in items
        if i["sk"] == "BOOK"
        for asset in images.from_stored(i.get("assets"))
    }
    retiring = {
        (i["pk"].removeprefix("BOOK#"), i["sk"].removeprefix("RETIRE#").replace("A#", "assets/", 1))
        for i in items
        if i["sk"].startswith("RETIRE#")
    }
    purging = {i["pk"].removeprefix("BOOK#") for i in items if i["sk"] == "PURGE"}
    for key in keys_of(objects, BOOK_PREFIX):
        if key.startswith(UPLOAD_PREFIX):
            continue  # a caller's upload: adopted and removed, or expired by the bucket's lifecycle rule
        if key.startswith(PIECES_PREFIX):
            continue  # a book's cache of built pieces: below
        book, _, name = key.removeprefix(BOOK_PREFIX).partition("/")
        cut = name.removesuffix(".md").removesuffix(".chapters.json")
        if (
            books.get(book) == cut
            or (book, cut) in retiring
            or (book, cut) in named_images
            or book in purging
        ):
            continue
        found.append(f"2: {key} belongs to no book's current revision nor waits to be retired")
    # ...and under books/pieces/: only books that still exist (or whose purge has yet to run) have a cache
    for key in keys_of(objects, PIECES_PREFIX):
        book = key.removeprefix(PIECES_PREFIX).partition("/")[0]
        if key != CURSOR_KEY and book not in books and book not in purging:
            found.append(f"2: {key} is a cached piece of a book that is gone")
    uploads = objects.client.list_multipart_uploads(Bucket=objects.settings.bucket).get("Uploads", [])
    for upload in uploads:
        found.append(f"2: multipart upload left open: {upload['Key']}")

    # 3. live sets are exact
    pending: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        # A batch's targets count in their batch (promise 9), and a bundle in no cap.
        single = not row.get("batch_id") and row.get("format") != BUNDLE
        if row["state"] == State.PENDING.value and single:
            pending[row["counted_against"]].add(row["export_id"])
    live = {
        item["pk"].removeprefix("CALLER#"): set(item.get("live_ids") or ())
        for item in items
        if item["sk"] == "LIVE"
    }
    for caller in set(pending) | set(live):
        if pending.get(caller, set()) != live.get(caller, set()):
            found.append(
                f"3: {caller}'s live set {sorted(live.get(caller, set()))} != pending "
                f"{sorted(pending.get(caller, set()))}"
            )

    # 4. one export per key: as the callers were answered, and as the table holds them
    for key, ids in (key_answers or {}).items():
        if len(ids) > 1:
            found.append(f"4: Idempotency-Key {key} answered with {sorted(ids)}")
    window = store.settings.idempotency_ttl_seconds
    by_key: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if row.get("key_digest"):
            by_key[row["key_digest"]].append(row["requested_at"])
    for digest, times in by_key.items():
        times.sort()
        if any(later - earlier < window for earlier, later in pairwise(times)):
            found.append(f"4: one key ({digest[:12]}...) made {len(times)} exports within one window")

    # 5. polls read only
    for op in poll_writes or []:
        found.append(f"5: a poll made a write: {op}")

    # 12. the shelf is the books: each (owner, book) once, and nothing else
    owned = sorted((i["pk"].removeprefix("BOOK#"), i.get("owner")) for i in items if i["sk"] == "BOOK")
    shelved = sorted(
        (i["sk"].rsplit("#", 1)[1], i["pk"].removeprefix("CALLER#"))
        for i in items
        if i["sk"].startswith("SHELF#")
    )
    if owned != shelved:
        found.append(f"12: the books {owned} are not the shelves' {shelved}")
    return found + webhook_violations(store) + limit_violations(store, settled=after_gc)


def _all_items(store: Any, starts: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every item whose sort key starts with one of `starts`, whole."""
    plain = TypeDeserializer()
    if _in_process_moto(store.client):
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][store.settings.region].get_table(store.settings.table)
        # Only the items asked for are serialised: that is the cost, per item, of reading moto's table.
        raw = [
            item.to_json()["Attributes"]
            for item in _moto_table_items(table)
            if item.range_key is not None and item.range_key.value.startswith(starts)
        ]
    else:
        raw, kwargs = [], {"TableName": store.settings.table, "ConsistentRead": True}
        while True:
            page = store.client.scan(**kwargs)
            raw += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    items = [{k: plain.deserialize(v) for k, v in item.items()} for item in raw]
    return [i for i in items if i["sk"].startswith(starts)]


def webhook_violations(store: Any, *, settled: bool = True) -> list[str]:
    """Promises 6 to 8. `settled`: the system has been run until nothing is due (6's "has ended")."""
    found: list[str] = []
    items = _all_items(store, ("HOOK#", "DLV#", "E#", "HEAD", "EVT"))
    endpoints = [i for i in items if i["pk"].startswith("CALLER#") and i["sk"].startswith("HOOK#")]
    deliveries = [i for i in items if i["sk"].startswith("DLV#")]
    events = [i for i in items if i["sk"].startswith("E#")]
    heads = {i["pk"].removeprefix("FEED#"): int(i["head"]) for i in items if i["sk"] == "HEAD"}

    # 8. the feed is 1..head, each event id once
    by_caller: dict[str, list[int]] = defaultdict(list)
    for e in events:
        by_caller[e["pk"].removeprefix("FEED#")].append(int(e["sk"].removeprefix("E#")))
    for caller in set(by_caller) | set(heads):
        if sorted(by_caller.get(caller, [])) != list(range(1, heads.get(caller, 0) + 1)):
            found.append(
                f"8: {caller}'s feed holds {sorted(by_caller.get(caller, []))}, head {heads.get(caller)}"
            )
    ids = [e["event_id"] for e in events]
    for event_id in sorted({i for i in ids if ids.count(i) > 1}):
        found.append(f"8: event {event_id} is in the feed {ids.count(event_id)} times")

    # 7. counts equal rows
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in deliveries:
        rows[d["pk"].removeprefix("HOOK#")].append(d)
    for ep in endpoints:
        eid = ep["endpoint_id"]
        for state in DELIVERY_STATES:
            counted, held = int(ep.get(f"n_{state}", 0)), sum(d["state"] == state for d in rows.get(eid, []))
            if counted != held:
                found.append(f"7: endpoint {eid} counts {counted} {state}, its rows hold {held}")

    # 6. each event once to each endpoint that wanted it, and every delivery ended
    for ep in endpoints:
        caller, eid = ep["pk"].removeprefix("CALLER#"), ep["endpoint_id"]
        have = {int(d["sk"].removeprefix("DLV#")) for d in rows.get(eid, [])}
        wanted = ep["state"] == "active" and int(ep.get("enabled", 1)) == 1
        for e in events:
            seq = int(e["sk"].removeprefix("E#"))
            subscribed = e["type"] in set(ep["events"]) and ep["created_at"] <= e["recorded_at"]
            if e["pk"] == f"FEED#{caller}" and wanted and subscribed and seq not in have:
                found.append(f"6: event {e['event_id']} never reached endpoint {eid}")
    for d in deliveries:
        if settled and d["state"] not in ("acked", "rejected", "expired", "withdrawn"):
            found.append(f"6: delivery {d['pk']}/{d['sk']} is still {d['state']}")
    return found


def limit_violations(store: Any, *, settled: bool = True) -> list[str]:
    """Promises 9 to 11. `settled`: every batch whose targets have all ended has been settled (the batch
    sweep has run, or every ending's settle went through)."""
    from bindery.limits import CallerClass, shard_of

    found: list[str] = []
    items = _all_items(store, ("EXPORT#", "BATCH#", "LIVE", "SHARD#"))
    rows = {i["export_id"]: i for i in items if i["sk"].startswith("EXPORT#")}
    live = {i["pk"].removeprefix("CALLER#"): i for i in items if i["sk"] == "LIVE"}
    settings = store.settings

    # 9. a batch's counts are its targets' endings, and a running batch is one with a target pending
    for batch in (i for i in items if i["sk"].startswith("BATCH#")):
        caller, batch_id = batch["pk"].removeprefix("CALLER#"), batch["batch_id"]
        targets = [rows.get(t["export_id"]) for t in json.loads(batch["targets"])]
        if any(t is None for t in targets):
            found.append(f"9: batch {batch_id} names a target with no row")
            continue
        ended = [t for t in targets if t is not None and t["state"] != State.PENDING.value]
        published = [t for t in ended if t.get("size_bytes") is not None]
        expected = {
            "targets_done": len(ended),
            "n_ready": len(published),
            "n_failed": sum(t["state"] == State.FAILED.value for t in ended),
            "n_cancelled": sum(t["state"] == State.CANCELLED.value for t in ended),
            "bytes": sum(int(t["size_bytes"]) for t in published),
        }
        for name, want in expected.items():
            if int(batch.get(name) or 0) != want:
                found.append(f"9: batch {batch_id}'s {name} is {batch.get(name)}, its targets say {want}")
        status = batch["state"]  # a batch's status is stored as `state`, the name the events pipe reads
        running = status == "running"
        if settled and running and len(ended) == len(targets):
            found.append(f"9: batch {batch_id} is running with every target ended")
        if not running and status != "cancelled" and len(ended) != len(targets):
            found.append(f"9: batch {batch_id} is {status} with a target pending")
        held = set(live.get(caller, {}).get("batch_ids") or ())
        if running != (batch_id in held):
            found.append(f"9: batch {batch_id} ({status}) and {caller}'s live batches disagree")

    # 9. ...and one Idempotency-Key made one batch in one window, as for an export (promise 4)
    made: dict[str, list[float]] = defaultdict(list)
    for batch in (i for i in items if i["sk"].startswith("BATCH#") and i.get("key_digest")):
        made[batch["key_digest"]].append(float(batch["created_at"]))
    for digest, times in made.items():
        times.sort()
        if any(later - earlier < settings.idempotency_ttl_seconds for earlier, later in pairwise(times)):
            found.append(f"9: one key ({digest[:12]}...) made {len(times)} batches within one window")

    # 10. a caller's usage is the bytes of its published files still stored
    stored: dict[str, int] = defaultdict(int)
    for row in rows.values():
        # A row from before the budget (no caller_class) never counted its bytes.
        if row.get("path") and row.get("size_bytes") is not None and row.get("caller_class"):
            stored[row["counted_against"]] += int(row["size_bytes"])
    for caller in set(stored) | set(live):
        usage = int(live.get(caller, {}).get("usage") or 0)
        if usage != stored.get(caller, 0):
            found.append(f"10: {caller}'s usage is {usage}, its stored files {stored.get(caller, 0)}")

    # 11. no cap is over: each shard counts exactly its pending exports, within its cap; each caller's
    # live sets are within the most any of its classes allows
    pending = [
        r
        for r in rows.values()
        if r["state"] == State.PENDING.value and r.get("format") != BUNDLE and r.get("caller_class")
    ]
    counted = {
        int(i["sk"].removeprefix("SHARD#")): int(i.get("n") or 0)
        for i in items
        if i["sk"].startswith("SHARD#")
    }
    for k, cap in enumerate(settings.shard_caps):
        n = sum(1 for r in pending if shard_of(r["export_id"]) == k)
        if counted.get(k, 0) != n or n > cap:
            found.append(f"11: shard {k} counts {counted.get(k, 0)} for {n} pending exports (cap {cap})")
    for caller, item in live.items():
        classes = {
            CallerClass(r.get("caller_class") or "standard")
            for r in pending
            if r["counted_against"] == caller
        }
        most = max(
            (settings.limits(c) for c in classes or {CallerClass.FLEET}), key=lambda lim: lim.live_exports
        )
        if len(item.get("live_ids") or ()) > most.live_exports:
            found.append(f"11: {caller} holds {len(item['live_ids'])} live exports, over {most.live_exports}")
    return found
