"""The PDF's sample pages in docs/samples: a book that shows each thing a printer looks at (the title page,
the contents, a footnote, a table across a page break, a CJK page and an Arabic page), typeset by the
pdf renderer and drawn by pdftoppm.

    python -m bindery_local.samples [docs/samples]
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bindery.engine import Source, Text, renderer_for
from bindery.manuscript import cut_text
from bindery.metadata import Metadata

PROSE = (
    "The harbour wall was built in the year of the great storm, when the sea came over the old quay and "
    "took the boats that were drawn up on it. The keeper kept a log of every tide, with the weather first, "
    "and the hour of each trimming of the wick, as his father had kept it before him. "
)

MANUSCRIPT = (
    f"""# The Harbour

{PROSE * 3}The log survives in the parish archive[^log], and it is the source of most of what follows.

{PROSE * 4}

[^log]: Three volumes, 1851 to 1893, bound in calf; the second is water-stained along its lower edge.

## The Wall

{PROSE * 3}

# Tide Tables

{PROSE}The keeper's tables for the spring of 1861, as he wrote them:

| Day | High water | Height (ft) | Low water | Weather |
|:----|:----------:|------------:|:---------:|:--------|
"""
    + "".join(
        f"| {d} March | {6 + d % 6}:{(d * 13) % 60:02d} | {14 + d % 5}.{d % 10} | "
        f"{d % 12}:{(d * 7) % 60:02d} | {('fair', 'squally', 'fog', 'rain, wind SW')[d % 4]} |\n"
        for d in range(1, 61)
    )
    + f"""
# 港口

港口的防波堤建于大风暴之年。那一年海水漫过旧码头，卷走了停在岸上的船只。守塔人记下每一次潮汐，先写天气，再写每次修剪灯芯的时刻，正如他父亲从前所做的那样。

{"灯塔的光每夜照亮海湾，渔船依靠它回港。" * 12}

# الميناء

بُني حاجز الميناء في سنة العاصفة الكبرى، حين جاء البحر فوق الرصيف القديم وأخذ القوارب المسحوبة عليه.
كان الحارس يدوّن كل مدّ وجزر، والطقس أولاً، وساعة كل تقليم للفتيل، كما كان أبوه يفعل من قبله.

{"ضوء المنارة ينير الخليج كل ليلة، وتعود قوارب الصيد على هديه. " * 10}
"""
)

# (file name, what to look for on the page, which occurrence, and how many pages after it)
PAGES = [
    ("pdf-title-page", "The Harbour Log", 0, 0),
    ("pdf-contents", "Contents", 0, 0),
    ("pdf-footnote", "Three volumes", 0, 0),
    ("pdf-table-across-pages", "Day", 1, 0),  # the second page the table is on: its header repeated
    ("pdf-cjk", "港口的防波堤", 0, 0),
    ("pdf-arabic", "الميناء", 1, 0),  # the chapter's page (the first mention is the contents)
]


def build(path: Path) -> None:
    sections = cut_text(MANUSCRIPT)
    source = Source(
        "0123456789abcdef0123",
        "The Harbour Log",
        1,
        tuple(s.title for s, _ in sections),
        1.8e9,
        metadata=Metadata(authors=("Ann Keeper",), publisher="Bindery Samples", rights="CC BY 4.0"),
        options={"page_size": "a5", "toc_depth": 2},
    )
    out = io.BytesIO()
    renderer_for("pdf").render(source, [Text(n, s.title, t) for n, (s, t) in enumerate(sections, 1)], out)
    path.write_bytes(out.getvalue())


HARBOUR = Path(__file__).resolve().parents[2] / "examples" / "harbour"
# The illustrated example: its cover, and the page with its first figure after the cover.
HARBOUR_PAGES = [("illustrated-pdf-cover", "", 0, 0), ("illustrated-pdf-figure", "more than sixty", 0, 1)]


def build_harbour(path: Path) -> None:
    """examples/harbour as a PDF: its metadata, cover and images, as a build would read them."""
    from bindery.images import Asset, examine
    from bindery.metadata import Metadata, merged
    from bindery_cli import manuscripts

    read = manuscripts.read(HARBOUR / "manuscript.md")  # its front matter, as `bindery books create` reads it
    title = read.title or HARBOUR.name
    metadata = merged(Metadata(), read.metadata)
    assets = []
    for n, file in enumerate(sorted((HARBOUR / "images").iterdir())):
        data = file.read_bytes()
        name = f"images/{file.name}"
        # [data].__iter__: the whole file, a GIF's or a WebP's frames walked through it
        picture = examine(name, None, data[:65536], data[-4096:], len(data), [data].__iter__)
        assets.append(
            Asset(name, f"{n:020d}", picture.content_type, picture.width, picture.height, len(data))
        )
    sections = cut_text(read.text)
    source = Source(
        "0123456789abcdef0123", title, 1, tuple(s.title for s, _ in sections), 1.8e9,
        metadata=metadata, assets=tuple(assets), options={"page_size": "a5", "toc_depth": 1},
        read_asset=lambda asset: iter([(HARBOUR / asset.name).read_bytes()]),
    )  # fmt: skip
    out = io.BytesIO()
    renderer_for("pdf").render(source, [Text(n, s.title, t) for n, (s, t) in enumerate(sections, 1)], out)
    path.write_bytes(out.getvalue())


def main(folder: str = "docs/samples") -> None:
    target = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        for made, pages_wanted in ((build, PAGES), (build_harbour, HARBOUR_PAGES)):
            _draw(made, pages_wanted, Path(tmp), target)


def _draw(made: Any, wanted: list[tuple[str, str, int, int]], tmp: Path, target: Path) -> None:
    pdf = tmp / "sample.pdf"
    made(pdf)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True)
    pages = [p.replace("\u202b", "").replace("\u202c", "") for p in text.stdout.split("\f")]
    for name, needle, occurrence, after in wanted:
        number = [n for n, page in enumerate(pages, 1) if needle in page][occurrence] + after
        stem = tmp / name
        page = ["-f", str(number), "-l", str(number)]
        subprocess.run(
            ["pdftoppm", "-png", "-r", "80", "-singlefile", *page, str(pdf), str(stem)], check=True
        )
        (target / f"{name}.png").write_bytes(stem.with_suffix(".png").read_bytes())
        print(f"{target / name}.png: page {number}")


if __name__ == "__main__":
    main(*sys.argv[1:])
