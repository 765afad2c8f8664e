"""`bindery export`, `bindery exports ...` and `bindery batch ...`: request files, watch them being built
(bars with totals: chapters, targets, bytes), and download them under the name the API gives."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bindery_cli.client import ApiError, Client, Export, ExportFailed
from bindery_cli.output import Exit, bar, fail, out, out_page, subject

STDOUT = Path("-")  # `--out -`: the file on stdout, the summary on stderr

FORMATS = ["markdown", "html", "epub", "pdf", "docx"]


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    export = commands.add_parser("export", parents=[common], help="request an export of a book")
    export.add_argument("book")
    export.add_argument("--format", "-f", required=True, choices=FORMATS)
    export.add_argument("--wait", "-w", action="store_true", help="show progress until ready, then download")
    export.add_argument(
        "--out",
        "-o",
        type=Path,
        help="where --wait writes the file (default: its download_name, the title); - for stdout",
    )
    export.add_argument("--idempotency-key", help="retry a request from elsewhere safely (default: fresh)")
    export.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a format option: page_size=a4 (pdf), toc_depth=2 (html, epub, pdf, docx)",
    )

    exports = commands.add_parser("exports", help="list, show and cancel exports").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    listing = exports.add_parser("list", parents=[common], help="a book's exports, newest first")
    listing.add_argument("book")
    listing.add_argument("--limit", type=int)
    listing.add_argument("--cursor")
    for name, text in (
        ("show", "one export"),
        ("cancel", "cancel a pending export, or end a ready one's link"),
        ("download", "download a ready export as --wait does (its download_name, SHA-256 checked)"),
    ):
        one = exports.add_parser(name, parents=[common], help=text)
        one.add_argument("book")
        one.add_argument("export")
    one.add_argument(
        "--out", "-o", type=Path, help="where to write it (default: its download_name); - for stdout"
    )

    batch = commands.add_parser("batch", help="many exports as one job").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    made = batch.add_parser("create", parents=[common], help="request a batch of BOOK:FORMAT targets")
    made.add_argument("targets", nargs="+", metavar="BOOK:FORMAT")
    made.add_argument("--wait", "-w", action="store_true", help="one bar per target, then download the zip")
    made.add_argument(
        "--out", "-o", type=Path, help="where --wait writes the zip (default: batch-BATCH.zip); - for stdout"
    )
    made.add_argument("--idempotency-key", help="retry a request from elsewhere safely (default: fresh)")
    listed = batch.add_parser("list", parents=[common], help="your batches, newest first")
    listed.add_argument("--limit", type=int)
    listed.add_argument("--cursor")
    for name, text in (("show", "one batch and its targets"), ("cancel", "cancel a batch")):
        batch.add_parser(name, parents=[common], help=text).add_argument("batch")


def run_exports(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        page = client.list_exports(args.book, args.cursor, args.limit)
        return out_page(args, dict(page), "exports", _line, "no exports")
    if args.action == "show":
        export = client.get_export(args.book, args.export)
        return out(args, export, _line(export))
    if args.action == "download":
        return run_download(client, args)
    # One DELETE cancels a pending export or ends a ready one's link, and answers 204 either way: what it
    # did is read back, so the user is told which (a build may have finished just before the cancel came).
    client.cancel_export(args.book, args.export)
    export = client.get_export(args.book, args.export)
    said = {"cancelled": f"cancelled {args.export}", "expired": f"ended the link of {args.export}"}
    return out(args, export, said.get(export["state"], _line(export)))


def parse_options(given: list[str]) -> dict[str, Any] | str:
    """The export's options from each `--option NAME=VALUE` (a number as a number), or why not."""
    options: dict[str, Any] = {}
    for option in given:
        name, sep, value = option.partition("=")
        if not sep or not name:
            return f"--option {option}: expected NAME=VALUE, e.g. --option page_size=a4"
        if name in options:
            return f"--option {name} given twice: give each option once"
        options[name] = int(value) if value.isdigit() else value
    return options


def run_export(client: Client, args: argparse.Namespace) -> int:
    options = parse_options(args.option)
    if isinstance(options, str):
        return fail(args, options)
    if args.wait and (refused := unwritable(args)):
        return fail(args, refused)
    export = client.export(args.book, args.format, args.idempotency_key, options or None)
    if not args.wait:
        return out(args, export, _line(export))
    started = time.monotonic()
    if not args.json:  # the id, should the wait be cut short: the export goes on without it
        print(f"bindery: export {export['id']} requested for {args.book}", file=sys.stderr)
    try:
        ready = wait_ready(client, args, export)
        return _fetch(client, args, ready, started)
    except KeyboardInterrupt:
        print(
            f"\nbindery: interrupted: export {export['id']} goes on; `bindery exports show {args.book} "
            f"{export['id']}`, then `bindery exports download {args.book} {export['id']}`",
            file=sys.stderr,
        )
        raise


def wait_ready(client: Client, args: argparse.Namespace, export: Export) -> Export:
    """The export, once ready, with a bar of its chapters; a book deleted meanwhile is ExportFailed."""
    # The total from the start: the book's chapter count now, until the build's own count arrives.
    chapters = client.get_book(args.book, every_chapter=False).get("chapters_total")
    building = bar(args, unit="chapter", desc=f"building {args.format}", total=chapters)

    def progress(seen: Export) -> None:
        done = seen.get("progress") or {}
        if building is not None and done:
            building.total = done.get("chapters_total", building.total)
            building.n = done.get("chapters_done", 0)
            building.refresh()

    try:
        ready = client.wait(args.book, export["id"], on_progress=progress)
    except ApiError as exc:
        if exc.code != "not_found":
            raise
        # Deleting a book deletes its exports: what was waited for ended without a file.
        gone: Export = {**export, "state": "deleted", "failure_code": "book_deleted"}
        raise ExportFailed(gone) from None
    finally:
        if building is not None:
            building.close()
    if building is not None:
        building.n = building.total or 0  # ready: every chapter is done
        building.refresh()
    return ready


def run_download(client: Client, args: argparse.Namespace) -> int:
    """`exports download BOOK EXPORT`: an export that is ready, downloaded as --wait would."""
    if refused := unwritable(args):
        return fail(args, refused)
    export = client.get_export(args.book, args.export)
    if export["state"] == "pending":
        message = f"export {args.export} is still pending: download it once `bindery exports show` says ready"
        return fail(args, message, "not_ready", Exit.NOT_READY)
    if export["state"] != "ready":
        raise ExportFailed(export)
    return _fetch(client, args, export, time.monotonic())


def _fetch(client: Client, args: argparse.Namespace, ready: Export, started: float) -> int:
    """A ready export downloaded (to --out, else its download_name), checked, and summed up."""
    fmt = ready.get("format") or args.format
    extension = {"markdown": "md"}.get(fmt, fmt)
    # The API's name for the file (the title, its letters kept): only its last part, never a path.
    named = Path(ready.get("download_name") or f"{args.book}.{extension}").name
    target = args.out or Path(named)
    size = download(client, args, ready["download_url"], target, ready.get("size_bytes"), ready.get("sha256"))
    took = time.monotonic() - started
    summary = f"{target}  {size:,} bytes  {fmt}, revision {ready.get('built_revision')}, {took:.1f} s"
    if ready.get("sha256"):
        summary += f"\nsha256 {ready['sha256']}: checked, the file is the one the worker built"
    if ready.get("complete") is False:
        skipped = ", ".join(f"{c['ordinal']}. {c['title']}" for c in ready.get("skipped_chapters", []))
        summary += f"\nincomplete: skipped {skipped}" if skipped else "\nincomplete"
    missing = ", ".join(f"{m['name']} (chapter {m['chapter']})" for m in ready.get("missing_images", []))
    if missing:
        summary += f"\nmissing images: {missing}"
    warned = ready.get("warnings") or []
    if warned:
        listed = ", ".join(f"{subject(w)} (chapter {w.get('chapter')}): {w.get('code')}" for w in warned)
        more = int(ready.get("warnings_total") or len(warned)) - len(warned)
        summary += f"\nwarnings: {listed}" + (f", and {more} more" if more > 0 else "")
    return _done(args, {**ready, "file": str(target)}, summary)


def run_batch(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        page = client.list_batches(args.cursor, args.limit)
        return out_page(args, page, "batches", _batch_line, "no batches")
    if args.action == "show":
        batch = client.get_batch(args.batch)
        return out(args, batch, "\n".join([_batch_line(batch), *(_target_line(t) for t in batch["targets"])]))
    if args.action == "cancel":
        client.cancel_batch(args.batch)
        return out(args, {"cancelled": args.batch}, f"cancelled {args.batch}")
    targets = []
    for target in args.targets:
        book, _, fmt = target.partition(":")
        if not book or not fmt:
            return fail(args, f"a target is BOOK:FORMAT, got {target!r}: e.g. {book or 'BOOK'}:epub")
        if fmt not in FORMATS:  # as export -f refuses it: before anything is sent
            return fail(args, f"{target}: no format {fmt!r}: one of {', '.join(FORMATS)}")
        targets.append({"book_id": book, "format": fmt})
    if args.wait and (refused := unwritable(args)):
        return fail(args, refused)
    batch = client.create_batch(targets, args.idempotency_key)
    if not args.wait:
        return out(args, batch, "\n".join([_batch_line(batch), *(_target_line(t) for t in batch["targets"])]))
    if not args.json:  # the id, should the wait be cut short: the batch goes on without it
        print(f"bindery: batch {batch['id']} requested", file=sys.stderr)
    try:
        return _wait_batch(client, args, batch)
    except KeyboardInterrupt:
        print(
            f"\nbindery: interrupted: batch {batch['id']} goes on; `bindery batch show {batch['id']}`",
            file=sys.stderr,
        )
        raise


def _wait_batch(client: Client, args: argparse.Namespace, batch: dict[str, Any]) -> int:
    started = time.monotonic()
    chapters: dict[str, int | None] = {}
    for t in batch["targets"]:
        if t["book_id"] not in chapters:
            chapters[t["book_id"]] = client.get_book(t["book_id"], every_chapter=False).get("chapters_total")
    overall = bar(args, position=0, unit="target", desc="batch", total=batch["targets_total"])
    bars = [
        bar(
            args,
            position=n,
            unit="chapter",
            desc=f"{t['book_id'][:8]}:{t['format']}",
            total=chapters[t["book_id"]],
        )
        for n, t in enumerate(batch["targets"], start=1)
    ]

    def progress(seen: dict[str, Any]) -> None:
        if overall is not None:
            overall.n = seen["targets_done"]
            overall.refresh()
        for shown, target in zip(bars, seen["targets"], strict=True):
            if shown is None:
                continue
            if target["state"] == "pending":
                export = client.get_export(target["book_id"], target["export_id"])
                done = export.get("progress") or {}
                shown.total = done.get("chapters_total", shown.total)
                shown.n = done.get("chapters_done", 0)
            else:
                shown.total = shown.total or 1
                shown.n = shown.total
            shown.set_postfix_str(target["failure_code"] or target["state"], refresh=True)

    try:
        ended = client.wait_batch(batch["id"], on_progress=progress)
    finally:  # closed however the wait ends, so that a last line is a line of its own
        for shown in [overall, *bars]:
            if shown is not None:
                shown.close()
    summary = _batch_line(ended)
    bundle = ended.get("bundle")
    if bundle is None or not bundle.get("download_url"):
        note = "no bundle: no target is ready" if bundle is None else f"bundle {bundle['state']}"
        return out(args, ended, f"{summary}\n{note}")
    target_path = args.out or Path(f"batch-{ended['id']}.zip")  # the name its Content-Disposition gives
    size = download(
        client, args, bundle["download_url"], target_path, bundle.get("size_bytes"), bundle.get("sha256")
    )
    took = time.monotonic() - started
    summary += (
        f"\n{target_path}  {size:,} bytes, {ended['ended']['ready']} files and manifest.json, {took:.1f} s"
    )
    summary += f"\nsha256 {bundle['sha256']}: checked"
    return _done(args, {**ended, "file": str(target_path)}, summary)


def unwritable(args: argparse.Namespace) -> str | None:
    """Why --out (or, without it, the current folder) cannot take the file: checked before anything is
    sent, so that a typo does not end a finished build with nowhere to put it."""
    if args.out == STDOUT:
        return "--out - writes the file to stdout: drop --json" if args.json else None
    target: Path = args.out or Path.cwd() / "file"
    if target.is_dir():
        return f"--out {target}: a directory: name the file to write (e.g. {target}/book.epub)"
    folder = target.parent
    if not folder.is_dir():
        return f"--out {target}: no such folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder}: not writable: give --out a path in a folder you can write"
    return None


def download(
    client: Client,
    args: argparse.Namespace,
    url: str,
    target: Path,
    size: int | None,
    sha256: str | None,
    shown: str | None = None,
) -> int:
    """The file at `url` written to `target`, checked; `--out -` writes it to stdout once it is checked.
    The progress bar names `shown`, else the target's file name."""
    if target == STDOUT:
        with tempfile.TemporaryDirectory(prefix="bindery-") as folder:
            held = Path(folder) / "download"
            size = download(client, args, url, held, size, sha256, shown="to stdout")
            with held.open("rb") as source:
                shutil.copyfileobj(source, sys.stdout.buffer)
            sys.stdout.flush()
            return size
    down = bar(args, unit="B", unit_scale=True, desc=f"downloading {shown or target.name}", total=size)

    def bytes_done(done: int, total: int | None) -> None:
        if down is not None:
            down.total = total or down.total
            down.update(done - down.n)

    try:
        return client.download(url, target, on_bytes=bytes_done, sha256=sha256)
    finally:
        if down is not None:
            down.close()


def _done(args: argparse.Namespace, data: Any, summary: str) -> int:
    """The summary of a download: on stderr when the file itself went to stdout."""
    if args.out == STDOUT:
        print(summary.replace(f"{STDOUT}  ", "stdout  ", 1), file=sys.stderr)
        return 0
    return out(args, data, summary)


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


def _line(export: Any) -> str:
    parts = [export["id"], export["format"], export["state"]]
    if export.get("progress"):
        parts.append(f"{export['progress']['chapters_done']}/{export['progress']['chapters_total']} chapters")
    if export.get("failure_code"):
        parts.append(export["failure_code"])
    if export.get("download_url"):
        parts.append(f"until {export.get('expires_at')}  {export['download_url']}")
    return "  ".join(parts)
