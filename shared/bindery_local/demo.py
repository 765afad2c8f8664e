"""`make demo`: the walk-through, against a running stack (`make run` in another terminal).

It creates a book from each examples/*.md, and an illustrated one from each examples/*/manuscript.md (as
`bindery books create` does: its front matter's metadata, each image it names uploaded, the cover set),
exports it in every format, polls with visible progress, downloads each file and prints its size and
checks its SHA-256, and — when links are short (BINDERY_LINK_TTL_SECONDS) — waits for one to lapse and
shows the poll say so and the bytes go.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from bindery.engine import FORMATS
from bindery_cli import books, manuscripts
from bindery_cli.client import ApiError, Client
from bindery_local import tokens

ROOT = Path(__file__).resolve().parents[2]
WAIT_FOR_EXPIRY_UP_TO = 120.0


def _call(method: str, url: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def main() -> int:
    api = os.environ.get("BINDERY_API") or f"http://127.0.0.1:{os.environ.get('PORT', '3000')}"
    try:
        token = os.environ.get("BINDERY_TOKEN") or tokens.mint("demo-user", key=tokens.secret(api))
    except tokens.NoSecret as exc:
        print(exc, file=sys.stderr)
        return 1
    out = Path(os.environ.get("BINDERY_DEMO_OUT", "demo-out"))
    out.mkdir(exist_ok=True)
    print(f"Bindery demo against {api}\n")
    last: tuple[str, str, dict[str, Any]] | None = None
    examples = sorted((ROOT / "examples").glob("*.md")) + sorted((ROOT / "examples").glob("*/manuscript.md"))
    for manuscript in examples:
        illustrated = manuscript.name == "manuscript.md"
        stem = manuscript.parent.name if illustrated else manuscript.stem
        title = stem.replace("-", " ").title()
        try:
            book = _illustrated(api, token, title, manuscript) if illustrated else None
        except ApiError as exc:
            print(f"could not create {stem}: {exc}", file=sys.stderr)
            return 1
        if book is None:
            status, book = _call(
                "POST", f"{api}/books", token, {"title": title, "manuscript": manuscript.read_text()}
            )
            if status != 201:
                print(f"could not create {manuscript.name}: {status} {book}", file=sys.stderr)
                return 1
        chapters, revision = len(book["chapters"]), book["revision"]
        print(f"book {book['id']} “{book['title']}”: {chapters} chapters, revision {revision}")
        if book.get("assets"):
            meta = book["metadata"]
            print(f"  by {', '.join(meta['authors'])}, {book['identifier']}, {len(book['assets'])} images")
        for fmt in FORMATS:
            _, export = _call("POST", f"{api}/books/{book['id']}/exports", token, {"format": fmt})
            started = time.monotonic()
            live = sys.stdout.isatty()
            while export.get("state") == "pending":
                if live:
                    print(f"\r  {fmt:<9} pending  {time.monotonic() - started:4.1f}s", end="", flush=True)
                time.sleep(0.25)
                _, export = _call("GET", f"{api}/books/{book['id']}/exports/{export['id']}", token)
            if export.get("state") != "ready":
                print(f"\r  {fmt:<9} {export.get('state')}  {export.get('failure_code')}")
                continue
            _, content = _fetch(export["download_url"])
            extension = export.get("download_name", "").rsplit(".", 1)[-1] or FORMATS[fmt].extension
            path = out / f"{stem}.{fmt}.{extension}" if extension == "zip" else out / f"{stem}.{extension}"
            path.write_bytes(content)
            took = time.monotonic() - started
            checked = (
                "sha256 ok"
                if hashlib.sha256(content).hexdigest() == export.get("sha256")
                else "SHA-256 MISMATCH"
            )
            print(f"\r  {fmt:<9} ready    {took:4.1f}s  {len(content):>9,} bytes  {checked}  -> {path}")
            for missing in export.get("missing_images", []):
                print(f"            missing image {missing['name']} (chapter {missing['chapter']})")
            last = (book["id"], export["id"], export)
    if last is None:
        return 1
    book_id, export_id, export = last
    _, now = _call("GET", f"{api}/books/{book_id}/exports/{export_id}", token)
    lapse = datetime.fromisoformat(now["expires_at"].replace("Z", "+00:00")).timestamp() - time.time()
    if lapse > WAIT_FOR_EXPIRY_UP_TO:
        print(f"\nLinks live {lapse:.0f}s more; `BINDERY_LINK_TTL_SECONDS=10 make run` shows one lapse.")
        return 0
    print(f"\nThe last link lapses at {now['expires_at']}; waiting {max(lapse, 0):.0f}s ...")
    time.sleep(max(lapse, 0) + 0.5)
    _, after = _call("GET", f"{api}/books/{book_id}/exports/{export_id}", token)
    print(f"  poll now says: state={after['state']} download_url={after['download_url']}")
    deadline = time.monotonic() + WAIT_FOR_EXPIRY_UP_TO
    while _fetch(export["download_url"])[0] == 200 and time.monotonic() < deadline:
        time.sleep(1)
    gone = _fetch(export["download_url"])[0]
    print(f"  the old download URL now answers {gone}: the GC has unlinked the bytes")
    return 0


def _illustrated(api: str, token: str, title: str, manuscript: Path) -> dict[str, Any]:
    """A book made as `bindery books create` makes it: its title and metadata from the front matter, each
    image the text names uploaded from beside it as an asset under that name (images/fog-days.png), then
    its cover set: what a publisher's upload tool does."""
    read = manuscripts.read(manuscript)
    read.title = read.title or title
    return dict(books.create(Client(api, token), read))


if __name__ == "__main__":
    sys.exit(main())
