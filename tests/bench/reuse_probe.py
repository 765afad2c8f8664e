"""Builds in one worker process, in turn, each with the cache of built pieces on or off, against the AWS
endpoint in the environment. Prints, as one JSON list, each build's outcome, seconds, CPU seconds, artifact's
SHA-256 and size, and S3 calls, and the process's peak RSS.

Each of `runs` (comma-separated; none at all: the process's setup alone) is "off", "on" (with the cache as
it stands), or "empty" (on, its cache for this format emptied first, uncounted: what filling it costs). A
worker's process serves build after build, so a run of builds here is what one serves; and with `pin`, the
process keeps to one core, as the worker has one vCPU."""

import json
import os
import resource
import sys
import time
from dataclasses import astuple, replace
from typing import Any

from bindery import engine, wiring
from bindery.chapter_lists import read_chapter_list
from bindery.config import Settings
from bindery.limits import CallerClass
from bindery.objects import Objects, pieces_prefix
from bindery.storage import Store
from tests.calls import recording

book_id, fmt, table, runs = sys.argv[1:5]
if len(sys.argv) > 5 and sys.argv[5] == "pin":
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
# A worker's process serves build after build: its renderer is imported once, at its first (the cold start's
# cost, which section 2 measures), and its S3 client is made once (`wiring.default_build_worker`), so both
# are made here before the clock starts, for both sides alike. A process's first S3 client takes about 65 ms
# (its service model read), a later one 6: inside the clock, that was a third of a warm html build.
engine.renderer_for(fmt)
_ = Objects(Settings(table=table, bucket=table)).client


def cpu() -> float:
    """CPU seconds of this process and its children waited for (the typesetter's)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def build(cache: str) -> dict[str, Any]:
    settings = replace(Settings(table=table, bucket=table), piece_cache="off" if cache == "off" else "on")
    store, objects = Store(settings), Objects(settings)
    _ = objects.client  # made, as the worker's is before its second build
    exports = wiring.api(settings, store, objects).exports
    # Fleet: the class whose pdf limit is the renderer's own 50 MiB (a standard caller's is 20).
    view, _ = exports.submit("bench-user", book_id, fmt, None, caller_class=CallerClass.FLEET)
    builds = wiring.build_worker(settings, store, objects)
    if cache == "empty":
        listed = objects.client.list_objects_v2(Bucket=table, Prefix=f"{pieces_prefix(book_id)}{fmt}/")
        objects.delete([obj["Key"] for obj in listed.get("Contents", [])])
    with recording(objects.client) as calls:
        started, spent = time.perf_counter(), cpu()
        outcome = builds.build(book_id, view["id"])
        seconds, cpu_seconds = time.perf_counter() - started, cpu() - spent
    # What every build pays before its first chapter, cache or not: the revision's chapter list, read.
    book = store.books.read_book(book_id)
    started = time.perf_counter()
    read_chapter_list(objects, book_id, book.cut, book.chapter_count) if book is not None else None
    rows_seconds = time.perf_counter() - started
    found = store.exports.read_export_for_owner(book_id, view["id"], "bench-user", time.time())
    sha256, size = (found[0].sha256, found[0].size_bytes) if found else (None, None)
    exports.cancel("bench-user", book_id, view["id"])  # revoked: its bytes go now
    renderer = engine.renderer_for(fmt)
    return {
        "outcome": outcome,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "sha256": sha256,
        "size_bytes": size,
        "s3": dict(calls.count()),
        "rows_seconds": rows_seconds,
        "runs_set": getattr(renderer, "runs_set", None),  # the pdf's runs set, not reused
        # and of its runs, folio sheets and contents, how many the join copied as an earlier join wrote
        # them, and wrote
        "joined": list(astuple(renderer.joined))[1:] if fmt == "pdf" else None,
    }


results = [build(cache) for cache in runs.split(",") if cache]  # none: the process's setup alone
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
for result in results:
    result["peak_rss"] = peak  # the process's: a probe measuring memory runs one build
print(json.dumps(results))
sys.exit(0 if all(result["outcome"] == "ready" for result in results) else 1)
