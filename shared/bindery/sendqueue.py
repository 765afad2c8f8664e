"""The webhook send queue: keys of deliveries whose next attempt is due, for the sender.

A message is only a key, (endpoint, seq): the delivery row is the job, and the sender reads it, so a lost,
duplicated or late message can cost an attempt's delay, never a second attempt (the claim is by number) or
a lost one (the sweep sends every due row again).
"""

from __future__ import annotations

import json
from typing import Any

from bindery.config import Settings
from bindery.faults import AWS_ERRORS, StorageError

BATCH = 10  # SendMessageBatch takes at most ten


def message(endpoint_id: str, seq: int) -> str:
    return json.dumps({"endpoint": endpoint_id, "seq": seq}, separators=(",", ":"))


class BadKey(ValueError):
    """A message that is not a delivery key: a poison message, logged and dropped, as redelivering it cannot
    help. Its own class, so that the sender drops only this and retries any other error."""


def parse_message(body: str) -> tuple[str, int]:
    try:
        data = json.loads(body)
        endpoint_id, seq = data["endpoint"], data["seq"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadKey(f"not a delivery key: {exc!r}") from None
    if not isinstance(endpoint_id, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise BadKey(f"not a delivery key: {body[:80]!r}")
    return endpoint_id, seq


class SendQueue:
    def __init__(self, settings: Settings):
        self.url = settings.webhook_send_queue_url
        self.region = settings.region
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:  # built on first use, never at import
            import boto3

            self._client = boto3.client("sqs", region_name=self.region)
        return self._client

    def send(self, keys: list[tuple[str, int]]) -> None:
        """Send every key, or raise StorageError naming how many did not go (the sweep resends them)."""
        for start in range(0, len(keys), BATCH):
            entries = [
                {"Id": str(n), "MessageBody": message(endpoint_id, seq)}
                for n, (endpoint_id, seq) in enumerate(keys[start : start + BATCH])
            ]
            try:
                failed = self.client.send_message_batch(QueueUrl=self.url, Entries=entries).get("Failed", [])
            except AWS_ERRORS as exc:
                raise StorageError(f"SendMessageBatch: {exc}") from exc
            if failed:
                raise StorageError(f"SendMessageBatch: {len(failed)} of {len(entries)} not sent")
