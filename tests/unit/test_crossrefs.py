"""Numbered cross-references, written as Quarto writes them (bindery.engine.crossrefs): a figure
(`![A map](map.png){#fig-map}`), a table's caption (`: Lights {#tbl-lights}`) and a section
(`## Harbours {#sec-harbours}`) are numbered in the book, and `@fig-map` reads "Figure 1" in every format,
a link to it, from any chapter; a reference to an id the book does not number is `?@fig-x` and a warning."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pikepdf
import pytest

from tests.books.illustrated import picture
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import add_asset, export
from tests.validators import epubcheck, pandoc

BOOK = """# The coast

![A map of the coast](images/coast.png){#fig-coast}

As @fig-coast shows, and [-@tbl-lights] lists, the lights of @sec-harbours stand on every headland.
See @fig-harbour too, and @fig-nowhere.

| Port | Light |
|------|-------|
| Wick | fixed |

: Lights of the north coast {#tbl-lights}

# The harbours

## Harbours {#sec-harbours}

![The harbour at Wick](images/harbour.png){#fig-harbour}

Back to @fig-coast and @tbl-lights.
"""

# What each reference reads, in order, by book and by chapter.
SAID = {
    "book": ["Figure 1", "1", "Section 2.1", "Figure 2", "Figure 1", "Table 1"],
    "chapter": ["Figure 1.1", "1.1", "Section 2.1", "Figure 2.1", "Figure 1.1", "Table 1.1"],
}
TARGETS = ["fig-coast", "tbl-lights", "sec-harbours", "fig-harbour", "fig-coast", "tbl-lights"]


def _book(stack: Stack) -> str:
    book = stack.create_book(BOOK)
    for name, seed in (("images/coast.png", 1), ("images/harbour.png", 2)):
        assert add_asset(stack, book, name, "image/png", picture("PNG", 40, 30, seed=seed)).status == 200
    return book


def _unresolved(view: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [
        (w["href"], w["line"], w["text"]) for w in view.get("warnings", []) if w["code"] == "link_unlanded"
    ]


@pytest.mark.parametrize("numbers", ["book", "chapter"])
def test_html_numbers_figures_tables_and_sections_and_links_each_reference(
    stack: Stack, numbers: str
) -> None:
    view, data = export(stack, _book(stack), "html", {"figure_numbers": numbers})
    html = data.decode()
    links = re.findall(r'<a href="#((?:fig|tbl|sec)-[^"]+)">([^<]+)</a>', html)
    assert links == list(zip(TARGETS, [s.replace(" ", "\u00a0") for s in SAID[numbers]], strict=True))
    first = SAID[numbers][0].replace(" ", "\u00a0")
    assert (
        '<figure id="fig-coast">' in html and f"<figcaption>{first}: A map of the coast</figcaption>" in html
    )
    table = SAID[numbers][5].replace(" ", "\u00a0")
    assert f'<table id="tbl-lights">\n<caption>{table}: Lights of the north coast</caption>' in html
    assert "?@fig-nowhere" in html and "{#fig" not in html and "<p>: Lights" not in html
    assert _unresolved(view) == [("@fig-nowhere", 6, "@fig-nowhere")]


def test_the_epubs_references_reach_each_chapters_page_and_epubcheck_passes(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, _book(stack), "epub")
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        one = package.read("OEBPS/chapter-000001.xhtml").decode()
        two = package.read("OEBPS/chapter-000002.xhtml").decode()
    assert 'href="chapter-000002.xhtml#fig-harbour"' in one and 'href="chapter-000001.xhtml#fig-coast"' in two
    assert '<figure id="fig-harbour">' in two and "<figcaption>Figure\u00a02: The harbour at Wick" in two
    path = tmp_path / "refs.epub"
    path.write_bytes(data)
    report = epubcheck(path)
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


def test_the_pdfs_references_read_as_numbered_and_go_to_their_targets_page(
    stack: Stack, tmp_path: Path
) -> None:
    view, data = export(stack, _book(stack), "pdf")
    path = tmp_path / "refs.pdf"
    path.write_bytes(data)
    text = " ".join(
        subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True).stdout.split()
    )
    assert "As Figure 1 shows, and 1 lists, the lights of Section 2.1 stand" in text.replace("\u00a0", " ")
    assert "Figure 1: A map of the coast" in text.replace("\u00a0", " ") and "?@fig-nowhere" in text
    with pikepdf.open(path) as pdf:
        pages = {page.objgen: n for n, page in enumerate(pdf.pages)}
        leaves = list(pdf.Root.Names.Dests.Names)
        named = {
            bytes(k).decode(): pages[v[0].objgen] for k, v in zip(leaves[::2], leaves[1::2], strict=True)
        }
        links = [
            (n, bytes(annot.A.D).decode())
            for n, page in enumerate(pdf.pages)
            for annot in page.get("/Annots", [])
            if annot.get("/A", {}).get("/S") == "/GoTo" and not bytes(annot.A.D).startswith(b"contents ")
        ]
    for target in ("fig-coast", "tbl-lights", "fig-harbour", "sec-harbours"):
        assert target in named, target
    assert named["fig-coast"] < named["fig-harbour"]  # each in its own chapter, on its own page
    assert {name for _, name in links} >= set(TARGETS)
    assert _unresolved(view) == [("@fig-nowhere", 6, "@fig-nowhere")]


def test_a_renamed_target_sets_again_the_chapters_that_refer_to_it_and_no_others(stack: Stack) -> None:
    book = _book(stack)
    export(stack, book, "html")
    renamed = BOOK.replace("fig-harbour}", "fig-wick}").replace("@fig-harbour", "@fig-wick")
    assert stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": renamed}).status == 200
    _, data = export(stack, book, "html")
    assert b'<a href="#fig-wick">Figure\xc2\xa02</a>' in data


def test_pandoc_reads_the_references_of_the_docx_as_links_to_its_bookmarks(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, _book(stack), "docx")
    path = tmp_path / "refs.docx"
    path.write_bytes(data)
    with zipfile.ZipFile(path) as package:
        document = package.read("word/document.xml").decode()
    marks = set(re.findall(r'<w:bookmarkStart w:id="\d+" w:name="([^"]+)"/>', document))
    assert {"fig-coast", "tbl-lights", "fig-harbour", "sec-harbours"} <= marks
    anchors = re.findall(r'<w:hyperlink w:anchor="([^"]+)">', document)
    assert [a for a in anchors if a.split("-")[0] in ("fig", "tbl", "sec")] == TARGETS
    text = " ".join(pandoc("-f", "docx", "-t", "plain", "--wrap=none", str(path)).split())
    assert "As Figure 1 shows, and 1 lists, the lights of Section 2.1" in text.replace("\u00a0", " ")
    # pandoc reads a picture and the caption under it as one figure: its caption, the number and the alt.
    read = " ".join(pandoc("-f", "docx", "-t", "markdown", "--wrap=none", str(path)).split())
    assert re.search(r"!\[\[\]\{#fig-coast \.anchor\}Figure.1: A map of the coast\]", read), read[:500]


def test_the_pdfs_references_say_their_targets_pages_where_the_export_asks(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs of one chapter: a reference to a figure in a later run is set before that run's pages are known.
    from bindery.engine import pdf as pdf_module

    monkeypatch.setattr(pdf_module, "RUN_CHAPTERS", 1)
    monkeypatch.setattr(pdf_module, "FIRST_RUN_SHARE", 1)
    view, data = export(stack, _book(stack), "pdf", {"reference_pages": "on"})
    path = tmp_path / "pages.pdf"
    path.write_bytes(data)
    with pikepdf.open(path) as pdf:
        labels = [pdf.pages[n].label for n in range(len(pdf.pages))]
    pages = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True).stdout.split("\f")
    shown = {
        target: labels[next(n for n, page in enumerate(pages) if caption in page.replace("\u00a0", " "))]
        for target, caption in (("fig-coast", "Figure 1: A map"), ("fig-harbour", "Figure 2: The harbour"))
    }
    text = " ".join("\f".join(pages).replace("\u00a0", " ").split())
    assert f"As Figure 1 on page {shown['fig-coast']} shows" in text, text[:800]
    assert f"See Figure 2 on page {shown['fig-harbour']} too" in text  # a run after it: known after
    assert shown["fig-harbour"] != shown["fig-coast"] and "page 000" not in text
    assert _unresolved(view) == [("@fig-nowhere", 6, "@fig-nowhere")]
