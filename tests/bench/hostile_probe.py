"""One family of hostile input (tests/books/hostile.py) through one reader, in a fresh process: the cut a
POST /books makes (normalising and cutting the manuscript), or one format's build of the book it cut into.
Prints {size: seconds} as JSON for each size given: the least of three runs at the smaller sizes, one at the
largest, each after a warm-up at the smallest, so that imports and first-use costs are no size's; or
{"refused": code} for a family the cut refuses before anything is built."""

import io
import json
import sys
import time

from bindery import errors
from bindery.engine import FORMATS, Source, Text, renderer_for
from bindery.images import Asset
from bindery.manuscript import cut_text
from tests.books.hostile import FAMILIES, PROSE

reader, family, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
make = PROSE if family == "prose" else FAMILIES[family]
# One picture, so that the markdown format zips the manuscript with it, reading every image named.
PICTURE = Asset("picture.png", "0" * 20, "image/png", 1, 1, 68)


def once(manuscript: str) -> float:
    started = time.perf_counter()
    sections = cut_text(manuscript)
    if reader == "cut":
        return time.perf_counter() - started
    source = Source(
        "abcdef0123456789abcd", "Hostile", 1, tuple(s.title for s, _ in sections), 1.8e9, assets=(PICTURE,)
    )
    texts = [Text(n, s.title, text) for n, (s, text) in enumerate(sections, start=1)]
    started = time.perf_counter()
    renderer_for(reader).render(source, texts, io.BytesIO())
    return time.perf_counter() - started


assert reader == "cut" or reader in FORMATS
try:
    once(make(min(sizes)))
except errors.Unprocessable as refused:
    print(json.dumps({"refused": refused.code}))
    sys.exit(0)
seconds = {}
for size in sizes:
    manuscript = make(size)
    runs = 1 if size == max(sizes) else 3
    seconds[len(manuscript.encode())] = min(once(manuscript) for _ in range(runs))
print(json.dumps(seconds))
