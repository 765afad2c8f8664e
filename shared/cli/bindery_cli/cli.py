"""`bindery`, the command line for any Bindery API.

bindery books create FILE.md [--title T] [--author A] ...
                                  a new book: its title and metadata from the file's front matter (pandoc's
                                  keys), each image it names uploaded from beside it, the cover set
bindery books list [--limit N] [--cursor C]
                                  your books, newest first
bindery books show | delete BOOK  the book (metadata, images, chapters); delete it and its exports
bindery books edit BOOK --set KEY=VALUE [--unset KEY]
                                  a merge patch of the title and metadata, with If-Match of the revision read
bindery books update BOOK FILE.md a new manuscript, its new images, its front matter's metadata (in
                                  place of the book's)
bindery books assets list BOOK | add BOOK FILE [--name N] | rm BOOK NAME
bindery export BOOK -f FORMAT [--wait] [--out PATH]
                                  request an export; --wait shows its progress, then downloads it under
                                  the name the API gives (its title, letters kept)
bindery exports list BOOK | show BOOK EXPORT | cancel BOOK EXPORT | download BOOK EXPORT [--out PATH]
bindery batch create BOOK:FORMAT ... [--wait] | list | show BATCH | cancel BATCH
bindery webhooks add URL --event KIND | list | show ID | edit ID | rm ID | rotate ID
bindery webhooks deliveries ID | redeliver ID DELIVERY
bindery events [--after CURSOR] [--follow]
                                  the events feed; --follow keeps following its head
bindery listen --forward-to URL [--secret whsec_...]
                                  follow the feed and POST each event to URL, signed as webhooks are
bindery watch FILE.md -f FORMAT [--out PATH] [--book BOOK]
                                  on each save of FILE (or an image it names): send what changed, export
                                  again (what did not change is reused), replace the file whole, print
                                  the export's notes; the first makes the book. Ctrl-C stops
bindery me                        your class, what you hold, and every cap

With the server package installed too (the repository's .venv), the local stack's tools:
bindery token USER [--class C]    a bearer token the local stack accepts
bindery invoke FUNCTION EVENT     one handler, in-process, with a sample event
bindery audits [--limit N]        the GC's last audit rows
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import urllib.parse
from typing import Any, NoReturn

from bindery_cli import books, exporting, hooks, watching
from bindery_cli.client import ApiError, Client, ExportFailed, LocalFileError
from bindery_cli.manuscripts import FileError
from bindery_cli.output import Exit, fail, out

EPILOG = """\
The API is --api or BINDERY_API, the token --token or BINDERY_TOKEN: any deployment, or `make run`'s.
--api, --token and --json go before the command or after it.
--json prints what the API answered (a stream, as with events --follow and listen, one JSON object a
line); an error is then {"error": {"code", "message"}} on stdout.

An error is one line on stderr, naming the problem and what to do. Exit status:
  0  done
  1  the API refused the request (the line names its error code)
  2  usage: a wrong command, argument or input file (a front matter's mistake names file:line: field);
     nothing was sent. Also a local file that cannot be written (the line names it and the reason)
  3  unreachable: no answer from the API or a download link after the retries, or a wait timed out
  4  what --wait waited for ended without a file (failed, cancelled, expired, its book deleted), or a
     download did not match its SHA-256 (nothing kept)
130  interrupted by Ctrl-C (but events --follow, listen and watch, which Ctrl-C ends: 0); --wait prints the
     export's or batch's id on stderr as it is requested, and on Ctrl-C how to go on
"""
# The local stack's tools live with the server (bindery_local), which a user of a deployment lacks.
LOCAL_TOOLS = "bindery_local.tools"
# The ids a command takes as arguments: an empty one (`books show ""`) would name the collection instead.
IDS = ("book", "export", "batch", "endpoint", "delivery", "name")


class _Parser(argparse.ArgumentParser):
    """argparse's, but a mistake is one line that says where the help is, not the usage and then the error."""

    json = False  # --json was given: a mistake is then {"error": ...} on stdout, as every error is

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: {message} (see {self.prog} -h)"
        if _Parser.json:
            print(json.dumps({"error": {"code": "usage", "message": line}}, ensure_ascii=False))
            self.exit(Exit.USAGE)
        self.exit(Exit.USAGE, line + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bindery",
        description="Bindery, from the command line: books, exports, batches, webhooks and events.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # --api, --token and --json go before the command (`bindery --api URL me`) or after it. The command's
    # own copies default to SUPPRESS, so that one given before is not overwritten by the command's default.
    common = _Parser(add_help=False)
    for options, default in ((parser, True), (common, False)):
        env = os.environ.get
        options.add_argument(
            "--api",
            default=env("BINDERY_API") if default else argparse.SUPPRESS,
            help="the API's URL (BINDERY_API)",
        )
        options.add_argument(
            "--token",
            default=env("BINDERY_TOKEN") if default else argparse.SUPPRESS,
            help="a bearer token (BINDERY_TOKEN)",
        )
        options.add_argument(
            "--json",
            action="store_true",
            default=False if default else argparse.SUPPRESS,
            help="print machine-readable JSON",
        )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    books.add_parsers(commands, common)
    exporting.add_parsers(commands, common)
    hooks.add_parsers(commands, common)
    watching.add_parser(commands, common)
    commands.add_parser("me", parents=[common], help="your class, what you hold now, and every cap")
    if importlib.util.find_spec("bindery_local") is not None:
        importlib.import_module(LOCAL_TOOLS).add_parsers(commands)
    else:
        for name in ("token", "invoke", "audits"):
            commands.add_parser(name, help="(the local stack's: needs the server package)", add_help=False)
    return parser


def main(argv: list[str] | None = None, *, store: Any = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    # Known before parsing, so that the parser's own mistakes (a bad --limit, an unknown format) obey it.
    _Parser.json = "--json" in given[: given.index("--")] if "--" in given else "--json" in given
    args, extra = _parser().parse_known_args(argv)
    if args.command in ("token", "invoke", "audits"):
        if importlib.util.find_spec("bindery_local") is None:
            message = f"`bindery {args.command}` is the local stack's: run it from the repository's .venv"
            return fail(args, message + " (make run), where the server package is installed")
        if extra:
            return fail(args, f"unrecognized arguments: {' '.join(extra)}: see bindery {args.command} -h")
        code: int = importlib.import_module(LOCAL_TOOLS).run(args, store=store)
        return code
    if extra:
        return fail(args, f"unrecognized arguments: {' '.join(extra)}: see bindery {args.command} -h")
    try:
        return _client_command(args)
    except KeyboardInterrupt:
        # Ctrl-C: how `events --follow`, `listen` and `watch` are stopped; anything else was cut short.
        return Exit.OK if args.command in ("events", "listen", "watch") else Exit.INTERRUPTED


def _client_command(args: argparse.Namespace) -> int:
    if not args.api or not args.token:
        missing = " and ".join(
            n
            for n, v in (("--api (BINDERY_API)", args.api), ("--token (BINDERY_TOKEN)", args.token))
            if not v
        )
        return fail(args, f"missing {missing}: give them, or export them (`make run` prints both)")
    given = urllib.parse.urlsplit(args.api)
    if given.scheme not in ("http", "https") or not given.netloc:
        return fail(
            args, f"--api {args.api}: give --api with http:// or https://, e.g. http://127.0.0.1:3000"
        )
    for name in IDS:
        if getattr(args, name, None) is not None and not getattr(args, name).strip():
            return fail(args, f"{name.upper()}: empty: give its id")
    client = Client(args.api, args.token, on_wait=None if args.json else _note_wait)
    try:
        if args.command == "books":
            return books.run(client, args)
        if args.command == "export":
            return exporting.run_export(client, args)
        if args.command == "exports":
            return exporting.run_exports(client, args)
        if args.command == "batch":
            return exporting.run_batch(client, args)
        if args.command == "webhooks":
            return hooks.run_webhooks(client, args)
        if args.command == "events":
            return hooks.run_events(client, args)
        if args.command == "listen":
            return hooks.run_listen(client, args)
        if args.command == "watch":
            return watching.run_watch(client, args)
        me = client.me()
        return out(args, me, _me(me))
    except FileError as exc:
        return fail(args, str(exc), "invalid_file")
    except ApiError as exc:
        advice = (
            exc.advice.replace(" ID ", f" {args.endpoint} ")
            if getattr(args, "endpoint", None)
            else exc.advice
        )
        message = exc.message + (f" ({advice})" if advice else "")
        message = message if args.json else f"{exc.code}: {message}"  # under --json the code is its own field
        if exc.code == "checksum_mismatch":
            return fail(args, _noted(message, exc), exc.code, Exit.NOT_READY)
        return fail(args, _noted(message, exc), exc.code, Exit.API_ERROR)
    except ExportFailed as exc:
        return fail(args, _noted(str(exc), exc), exc.code, Exit.NOT_READY)
    except LocalFileError as exc:  # before the OSError below: here, not the network
        return fail(args, _noted(str(exc), exc), "local_file", Exit.USAGE)
    except BrokenPipeError:
        # The reader closed stdout (`| head -1`): it has what it wanted. Python's own advice: point stdout
        # at devnull, so that the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    except (OSError, TimeoutError) as exc:
        message = f"{type(exc).__name__}: {exc}: check --api and the network"
        return fail(args, _noted(message, exc), "unreachable", Exit.UNREACHABLE)


def _note_wait(seconds: float, status: int) -> None:
    reason = "too many requests" if status == 429 else "the API is busy"
    print(f"bindery: note: {reason} ({status}): waiting {seconds:.0f} s, as the API asks", file=sys.stderr)


def _noted(message: str, exc: BaseException) -> str:
    """The error's line, with what was done about it after (books create deleting the book it made)."""
    return "; ".join([message, *getattr(exc, "__notes__", [])])


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


if __name__ == "__main__":
    sys.exit(main())
