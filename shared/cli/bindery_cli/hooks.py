"""`bindery webhooks ...`, `bindery events` and `bindery listen`: the endpoints Bindery posts events to, the
events feed, and a forwarder that follows the feed and posts each event to a local URL, signed as
Bindery's webhooks are (Standard Webhooks), for a deployment whose webhooks cannot reach this machine."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import urllib3
from standardwebhooks.webhooks import Webhook

from bindery_cli.client import Client
from bindery_cli.output import fail, line, out, out_page

EVENTS = [
    "bindery.export.ready",
    "bindery.export.failed",
    "bindery.export.cancelled",
    "bindery.export.expired",
    "bindery.batch.done",
    "bindery.batch.partial",
    "bindery.batch.failed",
    "bindery.batch.cancelled",
    "bindery.batch.revoked",
]


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    hooks = commands.add_parser("webhooks", help="the endpoints Bindery posts your events to").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    add = hooks.add_parser("add", parents=[common], help="a new endpoint: shows its signing secret, once")
    add.add_argument("url")
    _event_flag(add, required=True)
    add.add_argument("--description")
    listed = hooks.add_parser("list", parents=[common], help="your endpoints, oldest first")
    listed.add_argument("--limit", type=int)
    listed.add_argument("--cursor")
    hooks.add_parser("show", parents=[common], help="an endpoint and its deliveries' counts").add_argument(
        "endpoint"
    )
    edit = hooks.add_parser("edit", parents=[common], help="change its URL, events or description; --enable")
    edit.add_argument("endpoint")
    edit.add_argument("--url")
    _event_flag(edit, required=False)
    edit.add_argument("--description")
    edit.add_argument("--enable", action="store_true", help="enable a disabled endpoint again")
    hooks.add_parser("rm", parents=[common], help="delete an endpoint").add_argument("endpoint")
    hooks.add_parser(
        "rotate", parents=[common], help="a new secret, shown once; the old one signs beside it for 24 h"
    ).add_argument("endpoint")
    deliveries = hooks.add_parser(
        "deliveries", parents=[common], help="an endpoint's deliveries, newest first"
    )
    deliveries.add_argument("endpoint")
    deliveries.add_argument(
        "--state", choices=["queued", "in_flight", "acked", "rejected", "expired", "withdrawn"]
    )
    deliveries.add_argument("--limit", type=int)
    deliveries.add_argument("--cursor")
    redeliver = hooks.add_parser("redeliver", parents=[common], help="send an ended delivery once more")
    redeliver.add_argument("endpoint")
    redeliver.add_argument("delivery")

    events = commands.add_parser("events", parents=[common], help="your events feed, in order")
    events.add_argument(
        "--after", metavar="CURSOR", help="the events after this cursor (default: the oldest)"
    )
    events.add_argument("--limit", type=int, help="at most this many a page (1..100)")
    events.add_argument(
        "--follow", "-f", action="store_true", help="keep following the feed's head (Ctrl-C stops: exit 0)"
    )
    events.add_argument("--every", type=float, default=1.0, help="seconds between reads when following (1)")

    listen = commands.add_parser(
        "listen",
        parents=[common],
        help="follow the feed and POST each event to a local URL, signed as webhooks are",
        description="Follows your events feed from its head (or --after) and POSTs each event to URL as "
        "Bindery's webhooks do: the same body, webhook-id, webhook-timestamp and webhook-signature "
        "(Standard Webhooks), signed with --secret or a whsec_ secret it makes and prints. Verify it with "
        "the standardwebhooks library. Each event is posted once; the receiver's status is printed. "
        "Ctrl-C stops it (exit 0).",
    )
    listen.add_argument("--forward-to", required=True, metavar="URL", help="e.g. http://127.0.0.1:8000/hook")
    listen.add_argument("--secret", help="the whsec_ secret to sign with (default: a new one, printed)")
    _event_flag(listen, required=False)
    listen.add_argument(
        "--after", metavar="CURSOR", help="start after this cursor (default: the feed's head)"
    )
    listen.add_argument("--every", type=float, default=1.0, help="seconds between reads of the feed (1)")


def _event_flag(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--event",
        action="append",
        required=required,
        choices=[*EVENTS, "all"],
        metavar="KIND",
        help=f"an event kind (repeat for more), or all: {', '.join(EVENTS)}",
    )


def _kinds(given: list[str] | None) -> list[str] | None:
    if not given:
        return None
    return list(EVENTS) if "all" in given else list(dict.fromkeys(given))


def run_webhooks(client: Client, args: argparse.Namespace) -> int:
    if args.action == "add":
        made = client.create_webhook(args.url, _kinds(args.event) or [], args.description)
        text = f"{_hook_line(made)}\nsecret {made['secret']}  (shown this once: keep it to verify deliveries)"
        return out(args, made, text)
    if args.action == "list":
        page = client.list_webhooks(args.cursor, args.limit)
        return out_page(args, page, "webhooks", _hook_line, "no webhooks")
    if args.action == "show":
        hook = client.get_webhook(args.endpoint)
        counts = ", ".join(f"{n} {state}" for state, n in hook["deliveries"].items())
        return out(args, hook, f"{_hook_line(hook)}\ndeliveries: {counts}")
    if args.action == "edit":
        changes: dict[str, Any] = {}
        for key, value in (
            ("url", args.url),
            ("events", _kinds(args.event)),
            ("description", args.description),
        ):
            if value is not None:
                changes[key] = value
        if args.enable:
            changes["enabled"] = True
        if not changes:
            return fail(args, "nothing to change: give --url, --event, --description or --enable")
        hook = client.edit_webhook(args.endpoint, changes)
        return out(args, hook, _hook_line(hook))
    if args.action == "rm":
        client.delete_webhook(args.endpoint)
        return out(args, {"deleted": args.endpoint}, f"deleted {args.endpoint}")
    if args.action == "rotate":
        hook = client.rotate_secret(args.endpoint)
        return out(
            args,
            hook,
            f"{_hook_line(hook)}\nsecret {hook['secret']}  (shown this once; the old one "
            "signs beside it for 24 h)",
        )
    if args.action == "deliveries":
        page = client.list_deliveries(args.endpoint, args.state, args.cursor, args.limit)
        return out_page(args, page, "deliveries", _delivery_line, "no deliveries")
    delivery = client.redeliver(args.endpoint, args.delivery)
    return out(args, delivery, f"redelivering {args.delivery}: {delivery.get('state', 'queued')}")


def run_events(client: Client, args: argparse.Namespace) -> int:
    if not args.follow:
        page = client.events(args.after, args.limit)
        lines = [_event_line(e) for e in page["events"]] or ["no events"]
        lines += [f"head {page['head']}", f"next: --after {page['next_cursor']}"]
        return out(args, page, "\n".join(lines))
    cursor = Cursor(args.after)
    with _resumable(cursor):
        for event in follow(client, cursor, every=args.every, limit=args.limit):
            line(args, event, _event_line(event))
    return 0


class Cursor:
    """Where a follow has read up to: what `--after` resumes from."""

    def __init__(self, after: str | None):
        self.after = after


@contextlib.contextmanager
def _resumable(cursor: Cursor) -> Iterator[None]:
    """However a follow ends (Ctrl-C, an error), the line that resumes it, on stderr."""
    try:
        yield
    finally:
        if cursor.after is not None:
            print(f"bindery: resume with --after {cursor.after}", file=sys.stderr, flush=True)


def follow(
    client: Client,
    cursor: Cursor,
    *,
    every: float = 1.0,
    limit: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[dict[str, Any]]:
    """Every event after the cursor, in order, then each new one as it arrives: the feed never skips, and
    a page's `next_cursor` is never below the `after` it was read with, so none is seen twice. While the
    API does not answer (stopped, restarting), it keeps trying, waiting longer each time (up to 30 s), with
    a one-line note on stderr: Ctrl-C is what ends it."""
    backoff = 0.0
    while True:
        try:
            page = client.events(cursor.after, limit)
        except (OSError, TimeoutError) as exc:
            backoff = min(max(backoff * 2, every, 1.0), 30.0)
            why = str(exc).split(": ", 2)[-1][:120]
            print(
                f"bindery: note: no answer from the API ({why}): trying again in {backoff:.0f} s",
                file=sys.stderr,
            )
            sleep(backoff)
            continue
        if backoff:
            print("bindery: note: the API answers again", file=sys.stderr)
            backoff = 0.0
        for event in page["events"]:
            yield event
            cursor.after = event.get("cursor", cursor.after)
        cursor.after = page["next_cursor"]
        if not page["events"]:
            sleep(every)


def run_listen(client: Client, args: argparse.Namespace) -> int:
    secret = args.secret or "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    try:
        # The library decodes leniently (it drops what is not base64): check the form first.
        base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        signer = Webhook(secret)
    except ValueError:
        return fail(args, "--secret: not a Standard Webhooks secret: give whsec_ and base64, or leave it out")
    after = args.after or client.events(None, 1)["head"]
    kinds = set(_kinds(args.event) or EVENTS)
    started = {"forward_to": args.forward_to, "after": after, "secret": secret}
    line(
        args,
        started,
        f"forwarding your events after {after} to {args.forward_to}\nsecret {secret}  "
        "(verify with it; Ctrl-C stops)",
    )
    pool = urllib3.PoolManager(timeout=urllib3.Timeout(connect=3.0, read=10.0), retries=False)
    cursor = Cursor(after)
    with _resumable(cursor):
        for event in follow(client, cursor, every=args.every):
            if event["type"] not in kinds:
                continue
            status, error = forward(pool, signer, args.forward_to, event)
            shown = f"{status}" if status else f"failed: {error}"
            line(
                args, {"event": event, "status": status, "error": error}, f"{_event_line(event)}  -> {shown}"
            )
    return 0


def forward(pool: urllib3.PoolManager, signer: Webhook, url: str, event: dict[str, Any]) -> tuple[int, str]:
    """POST the event as its webhook would carry it: the body is the event without its place in the feed,
    compact JSON, signed with Standard Webhooks' headers. (status, "") or (0, why it was not answered)."""
    body = json.dumps({k: v for k, v in event.items() if k != "cursor"}, separators=(",", ":"))
    now = datetime.now(UTC).replace(microsecond=0)
    headers = {
        "content-type": "application/json",
        "webhook-id": event["id"],
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signer.sign(event["id"], now, body),
    }
    try:
        return pool.request("POST", url, body=body.encode(), headers=headers).status, ""
    except urllib3.exceptions.HTTPError as exc:
        return 0, type(exc).__name__


def _hook_line(hook: Any) -> str:
    state = "enabled" if hook["enabled"] else f"disabled ({hook.get('disabled_reason')})"
    return f"{hook['id']}  {hook['url']}  {state}  {', '.join(hook['events'])}"


def _delivery_line(delivery: Any) -> str:
    parts = [delivery.get("id", ""), delivery.get("event_id", ""), delivery.get("state", "")]
    attempts = delivery.get("attempts") or []
    if attempts:
        last = attempts[-1]
        parts.append(f"{len(attempts)} attempts, last {last.get('status') or last.get('error')}")
    return "  ".join(str(p) for p in parts)


def _event_line(event: Any) -> str:
    data = event.get("data", {})
    about = data.get("export_id") or data.get("batch_id") or ""
    return f"{event.get('cursor')}  {event['created_at']}  {event['type']}  {about}"
