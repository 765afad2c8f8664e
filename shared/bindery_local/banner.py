"""What `make run` prints once the stack is up: where the API and the embedded AWS are, where the state and
the token secret are kept, the sweeps' rates, each function's concurrency, and a token with a curl session
to paste."""

from __future__ import annotations

from pathlib import Path

from bindery_local import tokens

DEMO_USER = "demo-user"


# The curl session the banner prints. The e2e test runs it exactly as printed.
SESSION = r"""export API=@API TOKEN=@TOKEN
export BINDERY_API=$API BINDERY_TOKEN=$TOKEN    # what the bindery command line reads
BOOK=$(curl -sf -X POST $API/books -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"title": "Hello", "manuscript": "# Hello\n\nFirst words.\n\n# Goodbye\n\nLast words.\n"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
EXPORT=$(curl -sf -X POST $API/books/$BOOK/exports -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -d '{"format": "html"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for i in $(seq 30); do curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN" \
  | grep -q '"state":"ready"' && break; sleep 1; done
curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN"; echo
curl -sf -o hello.html "$(curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["download_url"])')" && cat hello.html
"""


def banner(
    api: str,
    endpoint: str,
    data_dir: str | None,
    sweeps: list[tuple[str, float]],
    limits: dict[str, int],
    local_http: bool = False,
    *,
    key: str,
    kept: Path,
) -> str:
    """`key` is the secret the stack verifies tokens with, kept for its owner in `kept` while it runs."""
    state = f"kept in {data_dir}" if data_dir else "in memory (set BINDERY_DATA_DIR to keep it)"
    hooks = (
        "webhook URLs may also be http://127.0.0.1 (BINDERY_WEBHOOK_LOCAL_HTTP=1: `make run` sets it)"
        if local_http
        else "webhook URLs: https, public addresses only, as deployed"
    )
    every = ", ".join(f"{name} every {seconds:g}s" for name, seconds in sweeps)
    wide = ", ".join(f"{name} {n}" for name, n in limits.items() if n > 1)
    session = SESSION.replace("@API", api).replace("@TOKEN", tokens.mint(DEMO_USER, key=key))
    return (
        "Bindery is running.\n"
        f"  API     {api}   (Swagger UI: {api}/docs)\n"
        f"  AWS     {endpoint}  (moto's server: DynamoDB, S3, SQS, EventBridge)\n"
        f"  state   {state}\n"
        f"  sweeps  {every}\n"
        f"  scale   up to this many instances of each function at once: {wide} (BINDERY_LOCAL_CONCURRENCY)\n"
        f"  hooks   {hooks}\n"
        f"  tokens  signed with this run's secret ({tokens.SECRET_VARIABLE}, or made at start), which only\n"
        f"          you can read, in {kept}, until Ctrl-C\n\n"
        f"A token for {DEMO_USER} (24 h; `bindery token NAME` makes more), and a session to paste:\n\n"
        f"{session}\n"
        "Ctrl-C stops everything.\n"
    )
