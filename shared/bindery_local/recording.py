"""The embedded AWS's state kept between runs (BINDERY_DATA_DIR): moto's recording of the requests it
served, one JSON line each, compacted to the writes and replayed into a new moto before it answers its
first request. `bindery_local.aws` serves moto and records; this reads and replays the recording."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RECORDING = "moto-recording.jsonl"
# Requests that change nothing in a replay; a recording keeps only the others, so a restart replays state,
# not polls. A receipt handle is moto's random answer to a receive, and receives are not replayed: a
# replayed delete or visibility change names a handle the replay never gave out, and changes nothing.
_READS = {
    "GetItem", "Query", "Scan", "TransactGetItems", "BatchGetItem", "DescribeTable", "ListTables",
    "DescribeTimeToLive", "DescribeStream", "GetShardIterator", "GetRecords", "ListStreams",
    "ReceiveMessage", "GetQueueUrl", "GetQueueAttributes", "ListQueues",
    "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
}  # fmt: skip


def _is_write(entry: dict[str, Any]) -> bool:
    if entry.get("method") in ("GET", "HEAD"):
        return False
    headers = {k.lower(): v for k, v in (entry.get("headers") or {}).items()}
    target = str(headers.get("x-amz-target", ""))
    return target.rsplit(".", 1)[-1] not in _READS


def recorded(lines: list[str]) -> list[dict[str, Any]]:
    """The recording's entries. A last line that does not parse was torn by a crash (`kill -9`) while moto
    wrote it, and moto records a request before it applies it: that request was never applied nor answered,
    so it is dropped. A torn line anywhere else is damage, and stops the start rather than lose state."""
    entries = []
    for n, line in enumerate(lines):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            if n < len(lines) - 1:
                raise
    return entries


def _addressed_anew(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry without the Host it was sent to: the replay sends it to this run's endpoint, which may be on
    another port (BINDERY_MOTO_PORT=0), and moto answers only its own name and port (`bindery_local.aws`)."""
    headers = {k: v for k, v in (entry.get("headers") or {}).items() if k.lower() != "host"}
    return {**entry, "headers": headers}


def replay(data_dir: Path, endpoint: str) -> int:
    """Rebuild the embedded AWS from the recording of earlier runs: moto's own state persistence. It runs in
    the process that serves moto: the recorder leaves out what it replays only in its own process.

    The recording is first compacted to the requests that changed something, so it grows with the state
    rather than with the time the stack has been polling. The compacted copy is written aside and renamed
    over the recording: rewritten in place, a crash during the rewrite cut the recording short, and the
    state was lost with it."""
    from moto.moto_api import recorder

    path = data_dir / RECORDING
    if not path.exists() or path.stat().st_size == 0:
        return 0
    kept = [
        _addressed_anew(entry)
        for entry in recorded([ln for ln in path.read_text().splitlines() if ln.strip()])
        if _is_write(entry)
    ]
    aside = path.with_name(path.name + ".tmp")
    aside.write_text("".join(json.dumps(entry) + "\n" for entry in kept))
    os.replace(aside, path)
    recorder.replay_recording(target_host=endpoint)
    return len(kept)
