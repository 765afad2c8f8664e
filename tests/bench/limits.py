"""7. Limits: the global cap's busiest counter, and a bundle's memory against its files.

The cap's writes spread over its 16 counters (on DynamoDB Local, against one counter), and a bundle's
peak RSS against the bytes of its files.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from typing import Any

from tests.bench.aws import PY, ROOT, Aws, local_service, servers_here
from tests.bench.report import record, say

CAP_WRITERS, CAP_SUBMITS = 16, 40  # threads, and submits each: 640, across 16 callers


def _cap_contention(ddb: str, s3: str, shards: int) -> tuple[float, float, int]:
    """640 submits from 16 threads at once against one service, the global cap cut into `shards` counters.
    Returns (submits a second, the busiest counter's share of the cap's writes, submits accepted)."""
    import threading
    from collections import Counter

    import bindery.limits
    import bindery.storage.endings
    import bindery.storage.exports

    saved = bindery.limits.CAP_SHARDS
    patched = {m: m.shard_of for m in (bindery.storage.exports, bindery.storage.endings)}
    try:
        if shards == 1:  # every export counted in one counter: the hot item sharding avoids
            bindery.limits.CAP_SHARDS = 1
            for module in patched:
                module.shard_of = lambda _: 0  # type: ignore[attr-defined]
        ex = local_service(ddb, s3, max_live_exports=1_000_000, max_live_exports_total=1_000_000)
        books = [ex.books.create_book(f"cap-{n}", "Cap", "# One\n\ntext\n")[0].id for n in range(CAP_WRITERS)]
        barrier, accepted = threading.Barrier(CAP_WRITERS), []

        def writer(n: int) -> None:
            barrier.wait()
            for _ in range(CAP_SUBMITS):
                accepted.append(ex.exports.submit(f"cap-{n}", books[n], "markdown", None)[0]["id"])

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(CAP_WRITERS)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
        per_counter = Counter(bindery.storage.exports.shard_of(e) for e in accepted)
        return len(accepted) / seconds, max(per_counter.values()) / len(accepted), len(accepted)
    finally:
        bindery.limits.CAP_SHARDS = saved
        for module, real in patched.items():
            module.shard_of = real  # type: ignore[attr-defined]


# (files, MiB each): both over one part, so both are multipart uploads; the large is 16 times the bytes.
BUNDLE_SMALL, BUNDLE_LARGE = (4, 4), (16, 16)


def _bundle_growth(aws: Aws, bucket: str, files: int, mib: int) -> dict[str, Any]:
    s3 = aws.client("s3")
    keys = []
    for n in range(files):
        key = f"artifacts/bench/f{files}x{mib}-{n}/a"
        s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(mib * 2**20))
        keys.append(key)
    probe = [PY, str(ROOT / "tests/bench/bundle_probe.py"), bucket, *keys]
    out = subprocess.run(probe, env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure() -> None:
    say("\n7. Limits: the global cap over 16 counters against one; a bundle's memory against its files")
    with servers_here() as (ddb, endpoint):
        one_rate, one_share, one_done = _cap_contention(ddb, endpoint, shards=1)
        many_rate, many_share, many_done = _cap_contention(ddb, endpoint, shards=16)
        assert one_done == many_done == CAP_WRITERS * CAP_SUBMITS
        # DynamoDB takes about 1,000 writes a second on one item (a transactional write costs two), and
        # transactions on one item at once cancel each other: the figure that matters is how many of the
        # cap's writes land on its busiest item. DynamoDB Local runs one transaction at a time, so it
        # shows neither the conflicts nor the limit: its throughput is info only.
        record(
            "limits",
            f"{CAP_WRITERS} x {CAP_SUBMITS} submits at once: the busiest counter's share of the cap's writes "
            f"(one counter: {one_share:.0%})",
            f"{many_share:.1%}",
            "≤ 12.5% (2 / 16)",
            many_share <= 2 / 16,
        )
        record(
            "limits",
            f"the same on DynamoDB Local: 16 counters {many_rate:.0f} submits/s, one {one_rate:.0f}/s",
            f"{many_rate / one_rate:.2f}",
            "",
            None,
        )
        aws = Aws(s3=endpoint, dynamodb=endpoint)
        bucket = f"bench-bundle-{uuid.uuid4().hex[:6]}"
        aws.client("s3").create_bucket(Bucket=bucket)
        small = _bundle_growth(aws, bucket, *BUNDLE_SMALL)
        large = _bundle_growth(aws, bucket, *BUNDLE_LARGE)
        # The process's whole peak, as Lambda would bill it; its growth over the imports, for the record.
        ratio = large["peak"] / small["peak"]
        record(
            "limits",
            f"a bundle's peak RSS: {BUNDLE_LARGE[0]} x {BUNDLE_LARGE[1]} MiB {large['peak'] / 2**20:.0f} MiB"
            f" (+{large['growth'] / 2**20:.1f} over its imports) / {BUNDLE_SMALL[0]} x {BUNDLE_SMALL[1]} MiB"
            f" {small['peak'] / 2**20:.0f} MiB (+{small['growth'] / 2**20:.1f})",
            f"{ratio:.2f}",
            "≤ 1.10",
            ratio <= 1.10,
        )
        record(
            "limits",
            f"bundle of {BUNDLE_LARGE[0]} x {BUNDLE_LARGE[1]} MiB: MiB/s from S3 into S3",
            f"{large['size'] / 2**20 / large['seconds']:.0f}",
            "",
            None,
        )
