"""`bindery`, the command line.

bindery token USER                      a bearer token the local stack accepts
bindery invoke FUNCTION EVENT.json      one handler, in-process, with a sample event (what
                                        `sam local invoke -e` does, without Docker)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def main(argv: list[str] | None = None, *, exports: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="bindery", description="Bindery's command line.")
    commands = parser.add_subparsers(dest="command", required=True)
    token = commands.add_parser("token", help="print a bearer token for USER, signed for the local stack")
    token.add_argument("user")
    token.add_argument("--ttl", type=int, default=86_400, help="seconds the token is valid (default 86400)")
    invoke = commands.add_parser("invoke", help="run one handler in-process with an event file")
    invoke.add_argument("function", help="submit, poll, build_worker, expiry_gc or stale_sweep")
    invoke.add_argument("event", help="an event file, e.g. events/poll_get_export.json")
    invoke.add_argument("--env-vars", help="a SAM env.json; its Parameters are set before the handler loads")
    audits = commands.add_parser("audits", help="print the last GC runs' audit rows, newest first")
    audits.add_argument("--limit", type=int, default=20)
    args = parser.parse_args(argv)

    if args.command == "token":
        from bindery.local import tokens

        print(tokens.mint(args.user, args.ttl))
    elif args.command == "invoke":
        return _invoke(args.function, args.event, args.env_vars)
    elif args.command == "audits":
        import json

        from bindery.exports import default_exports

        for row in (exports or default_exports()).store.audits(args.limit):
            print(json.dumps(row, sort_keys=True))
    return 0


def _invoke(function: str, event_path: str, env_path: str | None) -> int:
    import importlib
    import json
    import os
    import uuid
    from pathlib import Path

    if env_path:
        env = json.loads(Path(env_path).read_text())
        for scope in ("Parameters", function):
            os.environ.update({k: str(v) for k, v in env.get(scope, {}).items()})
    event = json.loads(Path(event_path).read_text())
    module = importlib.import_module(f"functions.{function}.app")

    class Context:
        function_name = function
        memory_limit_in_mb = 512
        invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function}"
        aws_request_id = uuid.uuid4().hex

        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 30_000

    print(json.dumps(module.handler(event, Context()), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
