"""One build in a fresh process, with the cache of built pieces on or off, against the AWS endpoint in the
environment. Prints its outcome, seconds, peak RSS, artifact's SHA-256 and size, and its S3 calls, as JSON."""

import json
import resource
import sys
import time
from dataclasses import astuple, replace

from bindery import engine, wiring
from bindery.chapter_lists import read_chapter_list
from bindery.config import Settings
from bindery.limits import CallerClass
from bindery.objects import Objects
from bindery.storage import Store
from tests.calls import recording

book_id, fmt, table, cache = sys.argv[1:5]
settings = replace(Settings(table=table, bucket=table), piece_cache=cache)
store, objects = Store(settings), Objects(settings)
exports = wiring.api(settings, store, objects).exports
# Fleet: the class whose pdf limit is the renderer's own 50 MiB (a standard caller's is 20).
view, _ = exports.submit("bench-user", book_id, fmt, None, caller_class=CallerClass.FLEET)
builds = wiring.build_worker(settings, store, objects)
# A worker's process serves build after build: its renderer is imported once, at its first (the cold start's
# cost, which section 2 measures), so it is loaded here before the clock starts, for both sides alike.
engine.renderer_for(fmt)


def cpu() -> float:
    """CPU seconds of this process and its children waited for (the typesetter's)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


with recording(objects.client) as calls:
    started, spent = time.perf_counter(), cpu()
    outcome = builds.build(book_id, view["id"])
    seconds, cpu_seconds = time.perf_counter() - started, cpu() - spent
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
# What every build pays before its first chapter, cache or not: the revision's chapter list, read.
book = store.books.read_book(book_id)
started = time.perf_counter()
read_chapter_list(objects, book_id, book.cut, book.chapter_count) if book is not None else None
rows_seconds = time.perf_counter() - started
found = store.exports.read_export_for_owner(book_id, view["id"], "bench-user", time.time())
sha256, size = (found[0].sha256, found[0].size_bytes) if found else (None, None)
exports.cancel("bench-user", book_id, view["id"])  # revoked: its bytes go now
result = {
    "outcome": outcome,
    "seconds": seconds,
    "cpu_seconds": cpu_seconds,
    "peak_rss": peak,
    "sha256": sha256,
    "size_bytes": size,
    "s3": dict(calls.count()),
    "rows_seconds": rows_seconds,
    "runs_set": getattr(engine.renderer_for(fmt), "runs_set", None),  # the pdf's runs set, not reused
    # and of its runs and folio sheets, how many the join copied as an earlier join wrote them, and wrote
    "joined": list(astuple(engine.renderer_for(fmt).joined))[1:] if fmt == "pdf" else None,
}
print(json.dumps(result))
sys.exit(0 if outcome == "ready" else 1)
