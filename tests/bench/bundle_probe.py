"""One bundle written in a fresh process, from S3 into S3, against the endpoint in the environment. The
files are already in the bucket (the parent put them), so this process's peak is the bundle's alone. It
prints its peak RSS and how much of it came after the imports (bytes), the seconds and the zip's size."""

import json
import sys
import time

from bindery import bundles, engine
from bindery.config import Settings
from bindery.objects import Objects
from bindery.states import State
from bindery.storage import Export


def high_water() -> int:
    # VmHWM, not ru_maxrss: ru_maxrss survives fork+exec on Linux and would carry the parent's peak in.
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


bucket, keys = sys.argv[1], sys.argv[2:]
objects = Objects(Settings(table=bucket, bucket=bucket))
objects.client.head_bucket(Bucket=bucket)  # the client built and connected before the baseline
files = [
    bundles.File(Export(f"e{n:04d}", "book", "epub", State.READY, 0.0, "bench", path=key, expires_at=4e9))
    for n, key in enumerate(keys)
]
before = high_water()
started = time.perf_counter()
writer = objects.writer(f"artifacts/bench/bundle-{len(keys)}/z", engine.ZIP.content_type)
entries = bundles.write_bundle(files, objects.chunks, writer)
size = writer.commit()
seconds = time.perf_counter() - started
peak = high_water()
print(
    json.dumps(
        {"peak": peak, "growth": peak - before, "seconds": seconds, "size": size, "files": len(entries)}
    )
)
