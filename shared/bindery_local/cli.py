"""`bindery`, the command line: a client for any Bindery API, and a few tools for the local stack.

bindery books create FILE.md [--title T]     a new book from a manuscript (any size: large ones upload)
bindery books show BOOK                      the book, its revision and chapters
bindery export BOOK --format F [--wait] [--out PATH]
                                             request an export; --wait shows its progress, then downloads
bindery exports list BOOK                    the book's exports, newest first
bindery exports show BOOK EXPORT             one export
bindery exports cancel BOOK EXPORT           cancel a pending export (or revoke a ready one's link)

bindery batch create BOOK:FORMAT ... [--wait] [--out PATH]
                                             many exports as one job; --wait shows one bar per target,
                                             then downloads the batch's zip
bindery batch list | show BATCH | cancel BATCH
bindery me                                   your class, what you hold, and every cap

bindery token USER [--class CLASS]           a bearer token the local stack accepts (CLASS: standard,
                                             fleet or restricted, the token's bindery_class claim)
bindery invoke FUNCTION EVENT.json           one handler, in-process, with a sample event (what
                                             `sam local invoke -e` does, without Docker)
bindery audits [--limit N]                   the GC's last audit rows, newest first

The API is --api or BINDERY_API, the token --token or BINDERY_TOKEN. --json prints what the API answered,
for programs. An error is one line naming its code and what to do, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--api", default=os.environ.get("BINDERY_API"), help="the API's URL (BINDERY_API)")
    common.add_argument(
        "--token", default=os.environ.get("BINDERY_TOKEN"), help="a bearer token (BINDERY_TOKEN)"
    )
    common.add_argument("--json", action="store_true", help="print machine-readable JSON")

    parser = argparse.ArgumentParser(prog="bindery", description="Bindery: turn a book into a file.")
    commands = parser.add_subparsers(dest="command", required=True)

    books = commands.add_parser("books", help="create and show books").add_subparsers(
        dest="action", required=True
    )
    create = books.add_parser("create", parents=[common], help="a new book from a markdown file")
    create.add_argument("file", type=Path)
    create.add_argument("--title", help="the book's title (default: the file's name)")
    show = books.add_parser("show", parents=[common], help="a book, its revision and chapters")
    show.add_argument("book")

    export = commands.add_parser("export", parents=[common], help="request an export of a book")
    export.add_argument("book")
    export.add_argument("--format", "-f", required=True, choices=["markdown", "html", "epub", "pdf"])
    export.add_argument("--wait", "-w", action="store_true", help="show progress until ready, then download")
    export.add_argument("--out", "-o", type=Path, help="where --wait writes the file (default: BOOK.EXT)")
    export.add_argument("--idempotency-key", help="retry a request from elsewhere safely (default: fresh)")
    export.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a format option: page_size=a4 (pdf), toc_depth=2 (html, epub, pdf)",
    )

    exports = commands.add_parser("exports", help="list, show and cancel exports").add_subparsers(
        dest="action", required=True
    )
    listing = exports.add_parser("list", parents=[common], help="a book's exports, newest first")
    listing.add_argument("book")
    listing.add_argument("--limit", type=int)
    listing.add_argument("--cursor")
    for name, text in (("show", "one export"), ("cancel", "cancel a pending export")):
        one = exports.add_parser(name, parents=[common], help=text)
        one.add_argument("book")
        one.add_argument("export")

    batch = commands.add_parser("batch", help="many exports as one job").add_subparsers(
        dest="action", required=True
    )
    made = batch.add_parser("create", parents=[common], help="request a batch of BOOK:FORMAT targets")
    made.add_argument("targets", nargs="+", metavar="BOOK:FORMAT")
    made.add_argument("--wait", "-w", action="store_true", help="one bar per target, then download the zip")
    made.add_argument("--out", "-o", type=Path, help="where --wait writes the zip (default: BATCH.zip)")
    made.add_argument("--idempotency-key", help="retry a request from elsewhere safely (default: fresh)")
    batch.add_parser("list", parents=[common], help="your batches, newest first")
    for name, text in (("show", "one batch and its targets"), ("cancel", "cancel a batch")):
        batch.add_parser(name, parents=[common], help=text).add_argument("batch")
    commands.add_parser("me", parents=[common], help="your class, what you hold now, and every cap")

    token = commands.add_parser("token", help="print a bearer token for USER, signed for the local stack")
    token.add_argument("user")
    token.add_argument("--class", dest="caller_class", choices=["standard", "fleet", "restricted"])
    token.add_argument("--ttl", type=int, default=86_400, help="seconds the token is valid (default 86400)")
    invoke = commands.add_parser("invoke", help="run one handler in-process with an event file")
    invoke.add_argument("function", help="a folder under functions/, e.g. poll, build_worker, webhook_sender")
    invoke.add_argument("event", help="an event file, e.g. events/poll_get_export.json")
    invoke.add_argument("--env-vars", help="a SAM env.json; its Parameters are set before the handler loads")
    audits = commands.add_parser("audits", help="print the last GC runs' audit rows, newest first")
    audits.add_argument("--limit", type=int, default=20)
    return parser


def main(argv: list[str] | None = None, *, exports: Any = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "token":
        from bindery_local import tokens

        print(tokens.mint(args.user, args.ttl, caller_class=args.caller_class))
        return 0
    if args.command == "invoke":
        return _invoke(args.function, args.event, args.env_vars)
    if args.command == "audits":
        from bindery.exports import default_exports

        for row in (exports or default_exports()).store.audits(args.limit):
            print(json.dumps(row, sort_keys=True))
        return 0
    return _client_command(args)


# ---- the client commands -------------------------------------------------------------------------


def _client_command(args: argparse.Namespace) -> int:
    from bindery_local.client import ApiError, Client, ExportFailed

    if not args.api or not args.token:
        missing = " and ".join(
            n
            for n, v in (("--api (BINDERY_API)", args.api), ("--token (BINDERY_TOKEN)", args.token))
            if not v
        )
        return _fail(f"missing {missing}: `make run` prints both", args.json)
    client = Client(args.api, args.token)
    try:
        if args.command == "books" and args.action == "create":
            text = args.file.read_text(encoding="utf-8")
            book = client.create_book(args.title or args.file.stem, text)
            return _out(
                args,
                book,
                f"{book['id']}  {book['title']}  revision {book['revision']}, "
                f"{len(book['chapters'])} chapters",
            )
        if args.command == "books":
            book = client.get_book(args.book)
            lines = [
                f"{book['id']}  {book['title']}  revision {book['revision']}, "
                f"{book['manuscript_bytes']:,} bytes"
            ]
            lines += [f"  {c['ordinal']:>4}. {c['title']}" for c in book["chapters"]]
            return _out(args, book, "\n".join(lines))
        if args.command == "export":
            return _export(client, args)
        if args.command == "batch":
            return _batch(client, args)
        if args.command == "me":
            me = client.me()
            return _out(args, me, _me(me))
        if args.action == "list":
            page = client.list_exports(args.book, args.cursor, args.limit)
            lines = [_line(e) for e in page.get("exports", [])]
            if page.get("next_cursor"):
                lines.append(f"more: --cursor {page['next_cursor']}")
            return _out(args, page, "\n".join(lines) or "no exports")
        if args.action == "show":
            export = client.get_export(args.book, args.export)
            return _out(args, export, _line(export))
        client.cancel_export(args.book, args.export)
        return _out(args, {"cancelled": args.export}, f"cancelled {args.export}")
    except ApiError as exc:
        return _fail(
            f"{exc.code}: {exc.message}" + (f" ({exc.advice})" if exc.advice else ""), args.json, exc.code
        )
    except ExportFailed as exc:
        return _fail(str(exc), args.json, exc.code)
    except (OSError, TimeoutError) as exc:
        return _fail(f"{type(exc).__name__}: {exc}", args.json, "unreachable")


def _export(client: Any, args: argparse.Namespace) -> int:
    options = {}
    for option in args.option:
        name, _, value = option.partition("=")
        options[name] = int(value) if value.isdigit() else value
    export = client.export(args.book, args.format, args.idempotency_key, options or None)
    if not args.wait:
        return _out(args, export, _line(export))
    started = time.monotonic()
    bar = _bar(args, unit="chapter", desc=f"building {args.format}")

    def progress(seen: dict[str, Any]) -> None:
        done = seen.get("progress") or {}
        if bar is not None and done:
            bar.total = done.get("chapters_total")
            bar.n = done.get("chapters_done", 0)
            bar.refresh()

    ready = client.wait(args.book, export["id"], on_progress=progress)
    if bar is not None:
        bar.n = bar.total or 0  # ready: every chapter is done
        bar.close()
    extension = ready.get("download_name", "").rsplit(".", 1)[-1] or {"markdown": "md"}.get(
        args.format, args.format
    )
    out = args.out or Path(f"{args.book}.{extension}")
    down = _bar(
        args, unit="B", unit_scale=True, desc=f"downloading {out.name}", total=ready.get("size_bytes")
    )

    def bytes_done(done: int, total: int | None) -> None:
        if down is not None:
            down.update(done - down.n)

    size = client.download(ready["download_url"], out, on_bytes=bytes_done, sha256=ready.get("sha256"))
    if down is not None:
        down.close()
    took = time.monotonic() - started
    summary = f"{out}  {size:,} bytes  {args.format}, revision {ready.get('built_revision')}, {took:.1f} s"
    if ready.get("sha256"):
        summary += f"\nsha256 {ready['sha256']}: checked, the file is the one the worker built"
    if ready.get("complete") is False:
        skipped = ", ".join(f"{c['ordinal']}. {c['title']}" for c in ready.get("skipped_chapters", []))
        summary += f"\nincomplete: skipped {skipped}" if skipped else "\nincomplete"
        missing = ", ".join(f"{m['name']} (chapter {m['chapter']})" for m in ready.get("missing_images", []))
        if missing:
            summary += f"; missing images: {missing}"
    return _out(args, {**ready, "file": str(out)}, summary)


def _batch(client: Any, args: argparse.Namespace) -> int:
    if args.action == "list":
        page = client.list_batches()
        lines = [_batch_line(b) for b in page["batches"]] or ["no batches"]
        return _out(args, page, "\n".join(lines))
    if args.action == "show":
        batch = client.get_batch(args.batch)
        return _out(
            args, batch, "\n".join([_batch_line(batch), *(_target_line(t) for t in batch["targets"])])
        )
    if args.action == "cancel":
        client.cancel_batch(args.batch)
        return _out(args, {"cancelled": args.batch}, f"cancelled {args.batch}")
    targets = []
    for target in args.targets:
        book, _, fmt = target.partition(":")
        if not book or not fmt:
            return _fail(f"a target is BOOK:FORMAT, got {target!r}", args.json)
        targets.append({"book_id": book, "format": fmt})
    batch = client.create_batch(targets, args.idempotency_key)
    if not args.wait:
        return _out(
            args, batch, "\n".join([_batch_line(batch), *(_target_line(t) for t in batch["targets"])])
        )
    started = time.monotonic()
    bars = [
        _bar(args, position=n, unit="chapter", desc=f"{t['book_id'][:8]}:{t['format']}")
        for n, t in enumerate(batch["targets"])
    ]

    def progress(seen: dict[str, Any]) -> None:
        for bar, target in zip(bars, seen["targets"], strict=True):
            if bar is None:
                continue
            if target["state"] == "pending":
                export = client.get_export(target["book_id"], target["export_id"])
                done = export.get("progress") or {}
                bar.total, bar.n = done.get("chapters_total"), done.get("chapters_done", 0)
            else:
                bar.total = bar.total or 1
                bar.n = bar.total
            bar.set_postfix_str(target["failure_code"] or target["state"], refresh=True)

    ended = client.wait_batch(batch["id"], on_progress=progress)
    for bar in bars:
        if bar is not None:
            bar.close()
    summary = _batch_line(ended)
    bundle = ended.get("bundle")
    if bundle is None or not bundle.get("download_url"):
        note = "no bundle: no target is ready" if bundle is None else f"bundle {bundle['state']}"
        return _out(args, ended, f"{summary}\n{note}")
    out = args.out or Path(f"{ended['id']}.zip")
    size = client.download(bundle["download_url"], out, sha256=bundle.get("sha256"))
    took = time.monotonic() - started
    summary += f"\n{out}  {size:,} bytes, {ended['ended']['ready']} files and manifest.json, {took:.1f} s"
    summary += f"\nsha256 {bundle['sha256']}: checked"
    return _out(args, {**ended, "file": str(out)}, summary)


def _batch_line(batch: Any) -> str:
    ended = batch["ended"]
    return (
        f"{batch['id']}  {batch['status']}  {batch['targets_done']}/{batch['targets_total']} ended: "
        f"{ended['ready']} ready, {ended['failed']} failed, {ended['cancelled']} cancelled"
    )


def _target_line(target: Any) -> str:
    parts = [f"  {target['export_id']}", f"{target['book_id']}:{target['format']}", target["state"]]
    if target.get("failure_code"):
        parts.append(target["failure_code"])
    return "  ".join(parts)


def _me(me: Any) -> str:
    limits, live, storage = me["limits"], me["live"], me["storage"]
    return "\n".join(
        [
            f"{me['caller']}  class {me['class']}",
            f"live exports   {live['exports']} of {limits['live_exports']}",
            f"live batches   {live['batches']} of {limits['live_batches']}, "
            f"at most {limits['batch_targets']} targets each",
            f"storage        {storage['usage_bytes']:,} of {storage['budget_bytes']:,} bytes",
            f"pdf            manuscripts up to {limits['pdf_manuscript_bytes']:,} bytes",
            f"service        {limits['live_exports_total']:,} live exports across every caller",
        ]
    )


def _bar(args: argparse.Namespace, **options: Any) -> Any:
    """A tqdm progress bar on stderr, with the elapsed time; none under --json."""
    if args.json:
        return None
    from tqdm import tqdm

    return tqdm(file=sys.stderr, leave=True, dynamic_ncols=True, **options)


def _line(export: Any) -> str:
    parts = [export["id"], export["format"], export["state"]]
    if export.get("progress"):
        parts.append(f"{export['progress']['chapters_done']}/{export['progress']['chapters_total']} chapters")
    if export.get("failure_code"):
        parts.append(export["failure_code"])
    if export.get("download_url"):
        parts.append(f"until {export.get('expires_at')}  {export['download_url']}")
    return "  ".join(parts)


def _out(args: argparse.Namespace, data: Any, text: str) -> int:
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else text)
    return 0


def _fail(message: str, as_json: bool, code: str = "usage") -> int:
    if as_json:
        print(json.dumps({"error": {"code": code, "message": message}}))
    else:
        print(f"bindery: {message}", file=sys.stderr)
    return 1


def _invoke(function: str, event_path: str, env_path: str | None) -> int:
    import importlib

    from bindery_local.context import LambdaContext

    if env_path:
        env = json.loads(Path(env_path).read_text())
        for scope in ("Parameters", function):
            os.environ.update({k: str(v) for k, v in env.get(scope, {}).items()})
    event = json.loads(Path(event_path).read_text())
    module = importlib.import_module(f"functions.{function}.app")

    context = LambdaContext(function, timeout_ms=30_000)
    print(json.dumps(module.handler(event, context), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
