"""The widest the PDF's fonts set a character, measured in Typst: the figures engine/breaks.py holds.

    python -m tests.font_widths

Every code point from U+0020 (surrogates aside; of planes 4 to 13, where Unicode assigns none, one
stands for the rest) is set alone by book.typ's own fallback lists, as `pdf.py` sets a book (the same
fonts, none of the system's), upright and italic, regular and bold, in the text font and in the code font,
and measured. Printed: the widest of each class `breaks.widest` tells apart, and where it is. Noto Sans
CJK's faces share their advances but for a few glyphs none wider than 0.6 em (fontTools), so the
simplified Chinese face stands for all five. Takes some minutes: run it when a font changes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import typst

from bindery.engine.pdf import DESIGN
from bindery.engine.typefaces import font_dirs

BUCKET = 256  # the widest in each bucket of this many code points is kept
CHUNK = 0x2000  # code points a process measures
# Each class breaks.widest tells apart begins a range of its own, so no bucket holds two.
RANGES = (
    (0x20, 0x7F),
    (0x7F, 0x80),
    (0x80, 0x600),
    (0x600, 0xD800),
    (0xE000, 0xFDFD),
    (0xFDFD, 0xFDFE),
    (0xFDFE, 0x40000),
    (0x40000, 0x40001),
    (0xE0000, 0x110000),
)
STYLES = (
    ("serif", "regular", "normal"),
    ("serif", "bold", "normal"),
    ("serif", "regular", "italic"),
    ("serif", "bold", "italic"),
    ("mono", "regular", "normal"),
    ("mono", "bold", "normal"),
    ("mono", "regular", "italic"),
    ("mono", "bold", "italic"),
)
# The widest of each bucket, in em, and the code point that is: one array per style, each a pair a bucket.
PROBE = """#import "book.typ": serif, mono
#let (lo, hi) = (int(sys.inputs.lo), int(sys.inputs.hi))
#let cjk = "Noto Sans CJK SC"
#context {
  let found = ()
  for (family, weight, style) in %s {
    let fonts = if family == "serif" { serif(cjk) } else { mono(cjk) }
    let buckets = ()
    for start in range(lo, hi, step: %d) {
      let (most, at) = (0pt, start)
      for cp in range(start, calc.min(start + %d, hi)) {
        let shown = text(font: fonts, size: 100pt, weight: weight, style: style, str.from-unicode(cp))
        let wide = measure(shown).width
        if wide > most { (most, at) = (wide, cp) }
      }
      buckets.push((most / 100pt, at))
    }
    found.push(buckets)
  }
  [#metadata(found)<widths>]
}
"""


def measure() -> dict[tuple[str, str, str], list[tuple[float, int]]]:
    """Per style, (the widest in em, where) for every bucket of every range, in order. Each chunk is
    measured by a process of its own: Typst memoises every measurement, a few GB over all of them."""
    chunks = [(start, min(start + CHUNK, hi)) for lo, hi in RANGES for start in range(lo, hi, CHUNK)]
    widths: dict[tuple[str, str, str], list[tuple[float, int]]] = {style: [] for style in STYLES}
    with ProcessPoolExecutor(max_workers=1, max_tasks_per_child=1) as pool:
        for found in pool.map(_chunk, chunks):
            for style, buckets in zip(STYLES, found, strict=True):
                widths[style] += buckets
    return widths


def _chunk(span: tuple[int, int]) -> list[list[tuple[float, int]]]:
    """Per style, the widest of each bucket of the code points in `span`."""
    styles = "(" + ", ".join(f'("{f}", "{w}", "{s}")' for f, w, s in STYLES) + ",)"
    with tempfile.TemporaryDirectory(prefix="bindery-widths-") as tmp:
        root = Path(tmp)
        shutil.copy(DESIGN, root / "book.typ")
        (root / "probe.typ").write_text(PROBE % (styles, BUCKET, BUCKET))
        found = typst.query(
            str(root / "probe.typ"),
            "<widths>",
            field="value",
            one=True,
            root=str(root),
            font_paths=[str(path) for path in font_dirs()],
            ignore_system_fonts=True,
            sys_inputs={"lo": str(span[0]), "hi": str(span[1])},
        )
    value = json.loads(found) if isinstance(found, str | bytes) else found
    return [[(float(em), int(at)) for em, at in buckets] for buckets in value]


def widest(buckets: list[tuple[float, int]], test: object) -> tuple[float, int]:
    """The widest (em, code point) among the buckets' widest whose code point passes `test`."""
    assert callable(test)
    return max(((em, at) for em, at in buckets if test(at)), default=(0.0, 0))


def main() -> None:
    widths = measure()
    classes = {  # as breaks.widest counts them
        "printable ASCII": lambda cp: 0x20 <= cp < 0x7F,
        "DEL": lambda cp: cp == 0x7F,
        "U+0080 to U+05FF": lambda cp: 0x80 <= cp < 0x600,
        "U+0600 and above, but U+FDFD": lambda cp: cp >= 0x600 and cp != 0xFDFD,
        "U+FDFD": lambda cp: cp == 0xFDFD,
    }
    for family in ("serif", "mono"):
        print(family)
        for name, test in classes.items():
            ours = {(w, s): b for (f, w, s), b in widths.items() if f == family}
            best = max(widest(b, test) for b in ours.values())
            styles = [f"{w} {s}" for (w, s), b in ours.items() if widest(b, test) == best]
            print(f"  {name}: {best[0]:.3f} em, U+{best[1]:04X} ({', '.join(styles)})")


if __name__ == "__main__":
    main()
