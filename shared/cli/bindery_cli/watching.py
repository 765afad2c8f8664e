"""`bindery watch FILE.md -f FORMAT`: a manuscript built again on each save, as `typst watch` does for one
file.

The first build makes the book from FILE as `books create` does (or, with `--book BOOK`, sends FILE to that
book as `books update` does); each later one sends the manuscript as `books update` does, with each image
whose bytes changed, and exports the book again: the service sets again only what the edit changed and
reuses the rest from its cache. The file is downloaded beside its last version and put in its place whole
(a rename), so a viewer that has it open reloads it; then the export's notes are printed, a line each.

FILE and the images it names are looked at every POLL_SECONDS (their times, sizes and files): a change is
built once it holds still for a poll (an editor writes a file in steps), and a save that leaves the bytes
as the last build had them builds nothing. A save made while a build runs is built after it. A mistake in
the file (its front matter, an image not there) or a refusal of one build is printed, and the watch goes
on; only a token refused or the book gone ends it. Ctrl-C (or SIGTERM) stops it, with status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from bindery_cli import books, manuscripts
from bindery_cli.client import ApiError, Client, ExportFailed, LocalFileError
from bindery_cli.exporting import FORMATS, STDOUT, download, parse_options, unwritable, wait_ready
from bindery_cli.manuscripts import FileError, Image
from bindery_cli.output import Exit, fail, line, note_lines

POLL_SECONDS = 0.3
# A refusal no save can mend: the token's, or the book gone. It ends the watch; any other is one build's.
FATAL = frozenset({"unauthorized", "not_found", "book_deleted"})
EXTENSIONS = {"markdown": "md"}  # a format's file extension, where it is not the format's name

# What a watched file is at a poll, each of FILE and its images in turn: (modified, size, file), or None
# while it cannot be read (an editor that saves by a rename has it gone for a moment).
Stats = tuple[tuple[int, int, int] | None, ...]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    watch = commands.add_parser(
        "watch",
        parents=[common],
        help="build FILE again on each save, as typst watch does: upload, export, replace the file",
        description="Watch FILE and the images it names: on each save, send what changed (the manuscript, "
        "as `books update` does, and each image whose bytes changed), export the book again (the service "
        "reuses what did not change), replace the output file whole, and print the export's notes. The "
        "first build makes the book as `books create` does, or sends FILE to --book. Ctrl-C stops.",
    )
    watch.add_argument("file", type=Path)
    watch.add_argument("--format", "-f", required=True, choices=FORMATS)
    watch.add_argument(
        "--out",
        "-o",
        type=Path,
        help="the file to keep replacing (default: FILE's name with the format's extension, beside it)",
    )
    watch.add_argument("--book", help="send FILE to this book, as `books update` does (default: make one)")
    watch.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a format option, as for `bindery export`: page_size=a4 (pdf), toc_depth=2",
    )


def run_watch(client: Client, args: argparse.Namespace) -> int:
    options = parse_options(args.option)
    if isinstance(options, str):
        return fail(args, options)
    if args.out == STDOUT:
        return fail(args, "--out -: watch replaces a file on each save: name one")
    if not args.file.is_file():
        return fail(args, f"{args.file}: no such file: name the markdown file to watch")
    refused = unwritable(args) if args.out else _unwritable_folder(args.file.resolve().parent)
    if refused:
        return fail(args, refused)
    watch = Watch(client, args, options)
    # SIGINT and SIGTERM stop it, however it was started (a shell starts a job in the background with SIGINT
    # ignored).
    given = {kind: signal.signal(kind, _interrupt) for kind in (signal.SIGINT, signal.SIGTERM)}
    try:
        watch.run()
    except KeyboardInterrupt:
        if not args.json:
            again = f" (`--book {watch.book}` goes on with its book)" if watch.book else ""
            print(f"\nbindery: stopped watching {args.file}{again}", file=sys.stderr)
        return Exit.OK
    finally:
        for kind, handler in given.items():
            signal.signal(kind, handler)


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


def _unwritable_folder(folder: Path) -> str | None:
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder}: not writable: give --out a path in a folder you can write"
    return None


class Watch:
    """One watched manuscript: its book, and what its last build was made from."""

    def __init__(
        self,
        client: Client,
        args: argparse.Namespace,
        options: dict[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
        every: float = POLL_SECONDS,
    ):
        self.client, self.args, self.options, self.sleep, self.every = client, args, options, sleep, every
        self.book: str | None = args.book
        self.images: list[Image] = []  # the images FILE named when last read: watched with it
        self.built: tuple[str, dict[str, str]] | None = None  # the SHA-256s the last good build was made from
        self.sent: dict[str, str] = {}  # each image's SHA-256 as the book holds it, as this watch knows

    def run(self) -> NoReturn:
        """Build now, then on each change that holds still for a poll; until interrupted."""
        seen = self.stats()
        self.build()
        changing: Stats | None = None
        while True:
            self.sleep(self.every)
            now = self.stats()
            if now == seen:
                changing = None
            elif now != changing:
                changing = now  # changed since the last poll: wait for it to hold still
            else:
                # Held still for a poll. What is seen is what the build reads: a save during the build
                # differs from it, and is built next.
                seen, changing = now, None
                self.build()

    def stats(self) -> Stats:
        return tuple(_stat(path) for path in [self.args.file, *(i.path for i in self.images)])

    def build(self) -> None:
        """One build; a mistake in the file, or a refusal no save can mend, is printed, and the watch goes
        on (a refusal that ends it is raised)."""
        args = self.args
        try:
            self._build()
        except FileError as exc:
            fail(args, str(exc), "invalid_file")
        except ApiError as exc:
            if exc.code in FATAL:
                raise
            fail(args, str(exc), exc.code)
        except ExportFailed as exc:
            if exc.code in FATAL:
                raise
            fail(args, str(exc), exc.code)
        except LocalFileError as exc:
            fail(args, str(exc), "local_file")
        except (OSError, TimeoutError) as exc:
            fail(args, f"{type(exc).__name__}: {exc}: check --api and the network", "unreachable")
        finally:
            sys.stdout.flush()  # a build's line (or, under --json, its error) is out before the next wait

    def _build(self) -> None:
        args, client = self.args, self.client
        # Each file's SHA-256 is taken before its bytes are sent: should it change in between, the next
        # build finds it changed and sends it again, rather than take the new bytes for sent.
        text_sha256 = _sha256(args.file)
        manuscript = manuscripts.read(args.file)
        self.images = manuscript.images
        made_from = (text_sha256, {i.name: _sha256(i.path) for i in manuscript.images})
        if made_from == self.built:
            return  # saved, but nothing changed
        started = time.monotonic()
        digests = made_from[1]

        def sent(image: Image) -> None:
            self.sent[image.name] = digests[image.name]

        def changed(image: Image, held: int | None) -> bool:
            # An image goes up when the book holds none of that name; else, once a build has sent or found it,
            # when its bytes changed since; before that, as `books update` sends it: when its size differs.
            if held is None or image.name not in self.sent:
                return held != image.path.stat().st_size
            return self.sent[image.name] != digests[image.name]

        if self.book is None:
            book = books.create(client, manuscript, on_image=sent)
            self.book = book["id"]
            if not args.json:
                print(
                    f"bindery: made book {self.book} from {args.file} (`--book {self.book}` builds it again)",
                    file=sys.stderr,
                )
        else:
            books.update(client, self.book, manuscript, on_image=sent, changed=changed)
        args.book = self.book  # the book the export's bar reads
        export = client.export(self.book, args.format, None, self.options or None)
        ready = wait_ready(client, args, export)
        target = self._target(ready)
        url, sha256 = ready["download_url"], ready.get("sha256")
        size = download(client, args, url, target, ready.get("size_bytes"), sha256)
        # The file is here: its link is ended, and its bytes with it, so that a long watch does not fill the
        # storage budget (the cache of pieces is not the file's: the next build reuses it all the same).
        with contextlib.suppress(ApiError, OSError):  # (should it fail, the link lapses by itself)
            client.cancel_export(self.book, export["id"])
        self.built = made_from
        self.sent |= digests  # what the book holds now: each image sent, or found the same size
        took = time.monotonic() - started
        revision = ready.get("built_revision")
        summary = f"{target}  {size:,} bytes  {args.format}, revision {revision}, {took:.1f} s"
        line(args, {**ready, "file": str(target)}, "\n".join([summary, *note_lines(ready)]))

    def _target(self, ready: Any) -> Path:
        """--out, or FILE's name with the export's extension (a markdown export of a book with images is a
        zip), beside it; never FILE itself."""
        if self.args.out is not None:
            return Path(self.args.out)
        fmt = self.args.format
        suffix = Path(ready.get("download_name") or "").suffix or f".{EXTENSIONS.get(fmt, fmt)}"
        file = self.args.file
        target = file.with_suffix(suffix)
        return file.with_name(f"{file.stem}.export{suffix}") if target.resolve() == file.resolve() else target


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise FileError(path, 0, str(path), f"cannot read it ({exc.strerror})") from None
