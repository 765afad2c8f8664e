"""What a command prints, and the status it exits with: text for people, `--json` for programs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import Any


class Exit(IntEnum):
    """`bindery`'s exit statuses, as its --help and the README list them."""

    OK = 0
    API_ERROR = 1  # the API refused the request: the line names its error code and what to do
    USAGE = 2  # the command, its arguments or an input file is wrong: nothing was sent
    UNREACHABLE = 3  # no answer from the API or a download link, after the retries; or a wait timed out
    NOT_READY = 4  # what --wait waited for ended without a file (failed, cancelled, expired), or a
    # download did not match its SHA-256 (and was not kept)
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT (events --follow and listen end 0: their stop)


def out(args: argparse.Namespace, data: Any, text: str) -> int:
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else text)
    return Exit.OK


def out_page(
    args: argparse.Namespace, page: dict[str, Any], key: str, show: Callable[[Any], str], empty: str
) -> int:
    """A page of a list: a line an item (or `empty`), then the cursor of the next page, if there is one."""
    lines = [show(item) for item in page[key]] or [empty]
    if page.get("next_cursor"):
        lines.append(f"more: --cursor {page['next_cursor']}")
    return out(args, page, "\n".join(lines))


def line(args: argparse.Namespace, data: Any, text: str) -> None:
    """One line of a stream (events --follow, listen): a JSON object a line under --json."""
    print(json.dumps(data, ensure_ascii=False) if args.json else text, flush=True)


def fail(args: argparse.Namespace, message: str, code: str = "usage", status: Exit = Exit.USAGE) -> int:
    """One line: on stderr for people, as {"error": {...}} on stdout under --json."""
    if getattr(args, "json", False):
        print(json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False))
    else:
        print(f"bindery: {message}", file=sys.stderr)
    return status


def bar(args: argparse.Namespace, **options: Any) -> Any:
    """A tqdm progress bar on stderr, with the elapsed time; none under --json."""
    if args.json:
        return None
    from tqdm import tqdm

    return tqdm(file=sys.stderr, leave=True, dynamic_ncols=True, **options)
