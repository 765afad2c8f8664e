"""The local stack's own commands, which `bindery` offers when this package (the server's) is installed
beside bindery-cli, as in the repository's .venv:

bindery token USER [--class CLASS]    a bearer token the local stack accepts (CLASS: standard, fleet or
                                      restricted, the token's bindery_class claim), signed with the secret
                                      of the stack at --api (BINDERY_API, else make run's own port), which
                                      it keeps for its owner while it runs; or with BINDERY_JWT_SECRET
bindery invoke FUNCTION EVENT.json    one handler, in-process, with a sample event (what
                                      `sam local invoke -e` does, without Docker)
bindery audits [--limit N] [--env-vars events/env.json]
                                      the GC's last audit rows, newest first (the env file points it
                                      at the local stack's embedded AWS)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def add_parsers(commands: Any) -> None:
    token = commands.add_parser(
        "token", help="print a bearer token for USER, signed for the local stack at --api (BINDERY_API)"
    )
    token.add_argument("user")
    token.add_argument("--class", dest="caller_class", choices=["standard", "fleet", "restricted"])
    token.add_argument("--ttl", type=int, default=86_400, help="seconds the token is valid (default 86400)")
    token.add_argument(
        "--api",
        default=argparse.SUPPRESS,  # `bindery --api URL token USER` too, or BINDERY_API
        help="the local stack the token is for (BINDERY_API; default http://127.0.0.1:3000)",
    )
    invoke = commands.add_parser("invoke", help="run one handler in-process with an event file")
    invoke.add_argument("function", help="a folder under functions/, e.g. poll, build_worker, webhook_sender")
    invoke.add_argument("event", help="an event file, e.g. events/poll_get_export.json")
    invoke.add_argument("--env-vars", help="a SAM env.json; its Parameters are set before the handler loads")
    audits = commands.add_parser("audits", help="print the last GC runs' audit rows, newest first")
    audits.add_argument("--limit", type=int, default=20)
    audits.add_argument("--env-vars", help="a SAM env.json (events/env.json: the local stack's AWS)")


def run(args: argparse.Namespace, *, store: Any = None) -> int:
    if args.command == "token":
        from bindery_cli.output import Exit, fail
        from bindery_local import tokens

        try:
            key = tokens.secret(getattr(args, "api", None))
        except tokens.NoSecret as exc:
            return fail(args, str(exc), "unreachable", Exit.UNREACHABLE)
        print(tokens.mint(args.user, args.ttl, key=key, caller_class=args.caller_class))
        return 0
    if args.command == "invoke":
        return _invoke(args.function, args.event, args.env_vars)
    from botocore.exceptions import NoCredentialsError

    from bindery.config import settings
    from bindery.storage import Store

    _environment(args.env_vars, "gc")
    try:
        rows = (store or Store(settings())).sweeps.audits(args.limit)
    except NoCredentialsError:
        print(
            "bindery: no AWS credentials: for the local stack, add --env-vars events/env.json",
            file=sys.stderr,
        )
        return 2
    for row in rows:
        print(json.dumps(row, sort_keys=True))
    return 0


def _environment(env_path: str | None, function: str) -> None:
    """A SAM env.json's Parameters, then the function's own, set before anything reads the settings."""
    if env_path:
        env = json.loads(Path(env_path).read_text())
        for scope in ("Parameters", function):
            os.environ.update({k: str(v) for k, v in env.get(scope, {}).items()})


def _invoke(function: str, event_path: str, env_path: str | None) -> int:
    from bindery_local.context import LambdaContext

    _environment(env_path, function)
    event = json.loads(Path(event_path).read_text())
    module = importlib.import_module(f"functions.{function}.app")

    context = LambdaContext(function, timeout_ms=30_000)
    print(json.dumps(module.handler(event, context), indent=2, ensure_ascii=False))
    return 0
