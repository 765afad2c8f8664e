"""The books the build sections make and the builds they run, each in a child process of its own (a peak
RSS is a process's): a manuscript of a given size, a book made through the real upload path, an
illustrated book, and one build."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.bench.aws import PY, ROOT, Aws

# Every feature of the dialect once (issue 48), as a chapter of a book "with every feature used" opens:
# pandoc reads each as Bindery does. `{n}` is the chapter's number (a note's label is the book's).
FEATURES = """A "quoted" word -- and 2^10^, H~2~O, [small capitals]{{.smallcaps}}, https://example.com/log and
$E = mc^2$, then $$\\sum_{{i=1}}^{{n}} i = \\frac{{n(n+1)}}{{2}}$$ and a note.[^n{n}]

Wick
:   what the keeper trims

a. dusk
b. midnight

- [x] trimmed
- [ ] logged

| the lamp at dusk,
| the lamp at dawn

::: note
An aside on the weather.
:::

```python
def trim(wick: int) -> int:
    return wick - 1  # the keeper's rule
```

| hour | trim |
|------|------|
| 4    | yes  |

[^n{n}]: The note's text.

"""


def write_manuscript(path: Path, megabytes: float, chapters: int, *, features: bool = False) -> None:
    """A book of `chapters` chapters of prose, `megabytes` in all; with `features`, each chapter opens with
    every feature of the dialect (FEATURES: math, highlighted code, a definition list and the rest)."""
    per = int(megabytes * 1024 * 1024 / chapters)
    paragraph = (
        "The keeper trimmed the wick at dusk, at midnight and at four, and wrote the hour of each trimming "
        "in the log, with *the weather first*, as the keeper always put it.\n\n"
    )
    opening = len(FEATURES) if features else 0
    body = (paragraph * (per // len(paragraph) + 1))[: max(0, per - 40 - opening)]
    with path.open("w") as out:
        for n in range(1, chapters + 1):
            out.write(f"# Chapter {n}\n\n{FEATURES.format(n=n) if features else ''}{body}\n\n")


def make_book(aws: Aws, table: str, manuscript: Path) -> str:
    return make_book_timed(aws, table, manuscript)[0]


def make_book_timed(aws: Aws, table: str, manuscript: Path) -> tuple[str, float]:
    """Create a book in a child process through the real upload path: presigned-upload key, then the
    streaming cut. Returns the book and the seconds the adoption took (what the API call spends)."""
    script = f"""
import boto3, json, sys, time
from bindery.config import Settings
from bindery import wiring
from bindery.objects import Objects, upload_key
from bindery.storage import Store
settings = Settings(table={table!r}, bucket={table!r})
ex = wiring.api(settings, Store(settings), Objects(settings))
book, _, _ = ex.books.create_book("bench-user", "Bench", "")
upload = ex.books.create_upload("bench-user", book.id)
boto3.client("s3").upload_file({str(manuscript)!r}, {table!r}, upload_key(book.id, upload["upload_id"]))
started = time.perf_counter()
ex.books.replace_manuscript("bench-user", book.id, None, manuscript=None, upload_id=upload["upload_id"])
print(book.id, time.perf_counter() - started)
"""
    out = subprocess.run([PY, "-c", script], env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    book, seconds = out.stdout.strip().splitlines()[-1].split()
    return book, float(seconds)


def make_illustrated(aws: Aws, table: str, images: int, image_bytes: int) -> str:
    probe = [PY, str(ROOT / "tests/bench/illustrated_probe.py"), table, str(images), str(image_bytes)]
    out = subprocess.run(probe, env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout.strip().splitlines()[-1]


def build(aws: Aws, table: str, book: str, fmt: str, nice: int = 0, keep: bool = False) -> dict[str, Any]:
    """One build in a fresh process. Its export is revoked afterwards (its bytes deleted), unless `keep`."""
    probe = [PY, str(ROOT / "tests/bench/build_probe.py"), book, fmt, table, *(["keep"] if keep else [])]
    out = subprocess.run(
        ["nice", "-n", str(nice), *probe],
        env=aws.env(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:] + out.stdout[-500:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def together(runs: dict[Any, Callable[[], Any]]) -> dict[Any, Any]:
    """Start every run at once (threads, each starting a process of its own) and wait for all."""
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {name: pool.submit(run) for name, run in runs.items()}
        return {name: future.result() for name, future in futures.items()}


# The small book every memory figure is a ratio over.
SMALL_MB, SMALL_CHAPTERS = 2.0, 50
