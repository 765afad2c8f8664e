"""One build in a fresh process, against the AWS endpoint in the environment. Prints the peak RSS (bytes)
and the build's seconds as JSON, so the parent compares processes that did nothing else."""

import json
import sys
import time

from bindery import wiring
from bindery.config import Settings
from bindery.limits import CallerClass
from bindery.objects import Objects
from bindery.storage import Store

book_id, fmt, table = sys.argv[1], sys.argv[2], sys.argv[3]
settings = Settings(table=table, bucket=table)
store, objects = Store(settings), Objects(settings)
exports = wiring.api(settings, store, objects).exports
# Fleet: the class whose pdf limit is the renderer's own 50 MB, which the bench measures at.
view, _ = exports.submit("bench-user", book_id, fmt, None, caller_class=CallerClass.FLEET)
started = time.perf_counter()
outcome = wiring.build_worker(settings, store, objects).build(book_id, view["id"])
seconds = time.perf_counter() - started
# VmHWM, not ru_maxrss: ru_maxrss survives fork+exec on Linux and would carry the parent's peak in.
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
child = 0
if fmt == "pdf":
    # Typst runs in a child process (bindery.engine.compiler): Lambda counts its memory too, so its peak is
    # added (an upper bound: the two peaks need not fall at the same moment).
    from bindery.engine.pdf import RENDERER

    child = RENDERER.peak_child_rss
    peak += child
found = store.exports.read_export_for_owner(book_id, view["id"], "bench-user", time.time())
size, path = (found[0].size_bytes, found[0].path) if found else (None, None)
if sys.argv[4:] != ["keep"]:
    exports.cancel("bench-user", book_id, view["id"])  # revoked: its bytes go now
print(
    json.dumps(
        {
            "outcome": outcome,
            "peak_rss": peak,
            "child_rss": child,
            "seconds": seconds,
            "size_bytes": size,
            "path": path,
        }
    )
)
sys.exit(0 if outcome == "ready" else 1)
