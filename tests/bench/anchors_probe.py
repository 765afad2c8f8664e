"""One cold build of a manuscript in this process, with whichever `bindery` is on the path (the bench runs it
against this tree and against an earlier one's): the cut, then the format's render, no cache, nothing in
S3. Prints, as JSON, the CPU seconds of each (this process's and its children's: the pdf's typesetter's),
and the artifact's size. With the book's anchors where this `bindery` has them, as its builds do.

    python tests/bench/anchors_probe.py FORMAT MANUSCRIPT

With `rename RENAMED` after them (this tree only): the build with the book's cache of built pieces (in S3,
moto's, in this process), then the build of RENAMED (the manuscript with a heading renamed) against that
cache and a cold one of it without: their CPU seconds, and how many chapters the warm build set again.
"""

import inspect
import io
import json
import resource
import sys
from pathlib import Path

from bindery import engine
from bindery.manuscript import cut

fmt, manuscript = sys.argv[1], Path(sys.argv[2])
renderer = engine.renderer_for(fmt)  # imported before the clock, as a worker's second build has it


def cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


data = manuscript.read_bytes()
kept = {}
if "anchors" in inspect.signature(engine.Source).parameters:
    from bindery.engine.anchors import Anchors

    kept["anchors"] = Anchors()
started = cpu()
sections = list(cut(data.splitlines(keepends=True), *kept.values()))
cut_seconds = cpu() - started
texts = [
    engine.Text(n, s.title, data[s.offset : s.offset + s.length].decode())
    for n, s in enumerate(sections, start=1)
]
source = engine.Source("bench", "Bench", 1, tuple(s.title for s in sections), 1_700_000_000.0, **kept)
out = io.BytesIO()
started = cpu()
renderer.render(source, texts, out)
cold = {"cut": cut_seconds, "build": cpu() - started, "bytes": len(out.getvalue())}
if sys.argv[3:4] != ["rename"]:
    print(json.dumps(cold))
    sys.exit(0)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from bindery.config import Settings  # noqa: E402
from bindery.engine.anchors import Anchors  # noqa: E402
from bindery.objects import Objects  # noqa: E402
from bindery.piece_cache import BuildPieces  # noqa: E402


def built(manuscript: bytes, pieces: BuildPieces | None) -> tuple[float, bytes]:
    anchors = Anchors()
    sections = list(cut(manuscript.splitlines(keepends=True), anchors))
    texts = [
        engine.Text(n, s.title, manuscript[s.offset : s.offset + s.length].decode())
        for n, s in enumerate(sections, start=1)
    ]
    titles = tuple(s.title for s in sections)
    source = engine.Source("bench", "Bench", 1, titles, 1_700_000_000.0, anchors=anchors, pieces=pieces)
    out = io.BytesIO()
    started = cpu()
    if pieces is not None:
        pieces.start()
    renderer.render(source, texts, out)
    if pieces is not None:
        pieces.finish()
    return cpu() - started, out.getvalue()


# What a build sets again of a chapter: its render (html, epub), its parse into Typst source (pdf).
parsed = {"n": 0}
if fmt == "pdf":
    from bindery.engine import pdf_source

    counted, method = pdf_source.RunParser, "chapter"
else:
    from bindery.engine import markup

    counted, method = markup, "render_chapter"  # type: ignore[assignment]
original = getattr(counted, method)


def counting(*args: object, **kwargs: object) -> object:
    parsed["n"] += 1
    return original(*args, **kwargs)


setattr(counted, method, counting)
renamed = Path(sys.argv[4]).read_bytes()
with mock_aws():
    settings = Settings(bucket="bench-pieces")
    boto3.client("s3", region_name=settings.region).create_bucket(Bucket=settings.bucket)
    objects = Objects(settings)
    filled, _ = built(data, BuildPieces(objects, "bench", fmt, max_bytes=1 << 30))
    runs = getattr(renderer, "runs_set", None)  # (the pdf's: a cold build sets every run)
    warm_pieces = BuildPieces(objects, "bench", fmt, max_bytes=1 << 30)
    parsed["n"] = 0
    warm, warm_bytes = built(renamed, warm_pieces)
    set_again, runs_set = parsed["n"], getattr(renderer, "runs_set", None)
    off, off_bytes = built(renamed, None)
print(json.dumps({
    "filled": filled, "warm": warm, "cold": off, "same": warm_bytes == off_bytes,
    "set_again": set_again, "runs_set": runs_set, "runs": runs,
}))  # fmt: skip
