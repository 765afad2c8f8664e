"""What a command prints, and the status it exits with: text for people, `--json` for programs; and the
notes of an export's answer, a line each."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
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


# The lists of notes an export's answer carries (each with its `_total`), and the word a line of each opens
# with.
NOTES = (("skipped_chapters", "skipped"), ("missing_images", "missing image"), ("warnings", "warning"))
# A note's fields that say where it is, or what kind it is: the rest say what it is about.
PLACES = frozenset({"chapter", "chapter_title", "ordinal", "title", "line", "code"})


def note_lines(export: Mapping[str, Any]) -> list[str]:
    """A line for each note the export's answer carries: a chapter skipped, an image missing, a warning (an
    image without alt text, a link that lands nowhere, any other by its code); then, for a list the
    answer cut short, how many more there were.

        warning: chapter 2 (The Quay), line 14: link_unlanded: #the-lamp "see the lamp"
    """
    lines = []
    for key, kind in NOTES:
        notes = export.get(key) or []
        lines += [f"{kind}: {_note(note)}" for note in notes]
        more = int(export.get(f"{key}_total") or len(notes)) - len(notes)
        if more > 0:
            lines.append(f"{kind}: and {more} more")
    return lines


def _note(note: Mapping[str, Any]) -> str:
    """chapter 2 (The Quay), line 14: its code: what it is about."""
    parts = []
    chapter, title = note.get("chapter", note.get("ordinal")), note.get("chapter_title", note.get("title"))
    if chapter is not None:
        at_line = f", line {note['line']}" if note.get("line") is not None else ""
        parts.append(f"chapter {chapter}" + (f" ({title})" if title else "") + at_line)
    if note.get("code"):
        parts.append(str(note["code"]))
    return ": ".join([*parts, subject(note)])


def subject(note: Mapping[str, Any]) -> str:
    """What a note is about: an image's name, a link's target and words, why a chapter was skipped, or
    whatever else it holds."""
    if "name" in note:
        return str(note["name"])
    if "href" in note:
        return f'{note["href"]} "{note.get("text", "")}"'
    if "reason" in note:
        return str(note["reason"])
    return ", ".join(f"{key} {value}" for key, value in note.items() if key not in PLACES)
