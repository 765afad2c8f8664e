"""`bindery`, the command line: `bindery token USER` prints a token the local stack accepts."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bindery", description="Bindery's command line.")
    commands = parser.add_subparsers(dest="command", required=True)
    token = commands.add_parser("token", help="print a bearer token for USER, signed for the local stack")
    token.add_argument("user")
    token.add_argument("--ttl", type=int, default=86_400, help="seconds the token is valid (default 86400)")
    args = parser.parse_args(argv)

    if args.command == "token":
        from bindery.local import tokens

        print(tokens.mint(args.user, args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
