"""Links inside the book land (bindery.engine.anchors): every heading has the id pandoc gives it in the whole
book, found as the book is cut and kept beside its chapter list, and a link to one (`[see](#id)`) reaches
it in html and epub, from any chapter to any other; a link to an id the book does not have is its text, and
a warning with its chapter, line and text."""

from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bindery.chapter_lists import chapters_key
from bindery.engine.anchors import Anchors
from bindery.piece_cache import CacheCounts
from tests.unit.conftest import Stack, count_pieces
from tests.validators import epubcheck, pandoc

BOOK = """# Getting started {#start}

Read [the options](#general-options) first, then [the end](#the-end), or [back here](#start).
A [link to nowhere](#no-such-section) stays words.

## Introduction

text

## Introduction

again

# Options

## General options

See [Introduction](#introduction-1) and [the first](#introduction).

## Introduction

third

# The end

Back to [options](#options) and [general](#general-options).
"""


# The ids BOOK's links name that a heading has.
INTERNAL = {"general-options", "the-end", "start", "introduction-1", "introduction", "options"}


def _artifact(stack: Stack, book: str, fmt: str) -> tuple[bytes, dict[str, Any]]:
    export_id = stack.submit(book, fmt).body["id"]
    assert stack.services.builds.build(book, export_id) == "ready"
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None
    body = stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=found[0].path)["Body"]
    return bytes(body.read()), stack.poll(book, export_id).body


def _ids_and_hrefs(html: str) -> tuple[list[str], list[str]]:
    return re.findall(r'\bid="([^"]+)"', html), re.findall(r'\bhref="([^"]*#[^"]*)"', html)


def _pandoc_heading_ids(manuscript: str) -> list[str]:
    return re.findall(r'<h[1-6] id="([^"]+)"', pandoc("-f", "markdown", "-t", "html", text=manuscript))


def test_the_cut_keeps_every_headings_id_as_pandoc_gives_it(stack: Stack) -> None:
    book = stack.create_book(BOOK)
    found = stack.store.books.read_book(book)
    assert found is not None
    kept = json.loads(stack.objects.read_or_none(chapters_key(book, found.cut)) or b"null")
    anchors = Anchors.from_rows(kept["anchors"], 3)
    assert anchors is not None
    assert [a.id for a in anchors.anchors] == _pandoc_heading_ids(BOOK)
    assert [(a.chapter, a.id) for a in anchors.anchors][:4] == [
        (1, "start"), (1, "introduction"), (1, "introduction-1"), (2, "options"),
    ]  # fmt: skip


def test_every_internal_link_of_the_html_lands_and_one_to_nowhere_is_a_warning(stack: Stack) -> None:
    book = stack.create_book(BOOK)
    data, polled = _artifact(stack, book, "html")
    html = data.decode()
    ids, hrefs = _ids_and_hrefs(html)
    headings = re.findall(r'<h[1-6] id="([^"]+)"', html)
    assert headings == _pandoc_heading_ids(BOOK)
    internal = [h for h in hrefs if h.startswith("#") and not h.startswith(("#ch-", "#fn"))]
    assert set(internal) == {
        "#general-options",
        "#the-end",
        "#start",
        "#introduction-1",
        "#introduction",
        "#options",
    }
    assert all(h[1:] in ids for h in hrefs if h.startswith("#")), [h for h in hrefs if h[1:] not in ids]
    assert "no-such-section" not in html and "A link to nowhere stays words." in html
    assert polled["warnings"] == [
        {
            "code": "link_unlanded", "chapter": 1, "chapter_title": "Getting started",
            "href": "#no-such-section", "line": 4, "text": "link to nowhere",
        }
    ]  # fmt: skip


def test_every_internal_link_of_the_epub_reaches_its_chapters_page_and_epubcheck_passes(
    stack: Stack, tmp_path: Path
) -> None:
    book = stack.create_book(BOOK)
    data, _ = _artifact(stack, book, "epub")
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        pages = {
            n.removeprefix("OEBPS/"): package.read(n).decode()
            for n in package.namelist()
            if n.endswith(".xhtml")
        }
    ids = {(name, i) for name, page in pages.items() for i in _ids_and_hrefs(page)[0]}
    links = [(name, h) for name, page in pages.items() for h in _ids_and_hrefs(page)[1]]
    for name, href in links:
        page, _, anchor = href.partition("#")
        assert (page or name, anchor) in ids, (name, href)
    chapter_one = pages["chapter-000001.xhtml"]
    assert 'href="chapter-000002.xhtml#general-options"' in chapter_one and 'href="#start"' in chapter_one
    assert 'href="chapter-000003.xhtml#the-end"' in chapter_one
    path = tmp_path / "links.epub"
    path.write_bytes(data)
    report = epubcheck(path)
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


@pytest.mark.parametrize("fmt", ["html", "epub"])
def test_a_list_without_anchors_is_built_as_its_anchors_make_it_found_again(stack: Stack, fmt: str) -> None:
    # A cut made before anchors were kept: its list holds the chapters alone, and the build cuts the
    # manuscript again for them, so that the book is the same as one with them.
    book = stack.create_book(BOOK)
    cold, _ = _artifact(stack, book, fmt)
    found = stack.store.books.read_book(book)
    assert found is not None
    key = chapters_key(book, found.cut)
    rows = json.loads(stack.objects.read_or_none(key) or b"null")["chapters"]
    stack.objects.put_bytes(key, json.dumps(rows).encode(), "application/json")
    again, polled = _artifact(stack, book, fmt)
    assert polled["state"] == "ready" and polled["warnings"][0]["href"] == "#no-such-section"
    assert again == cold


@pytest.mark.parametrize("fmt", ["html", "epub"])
def test_renaming_a_linked_heading_sets_again_the_chapters_that_link_to_it_and_no_others(
    stack: Stack, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chapters = [f"# Chapter {n}\n\nText of chapter {n}.\n" for n in range(1, 7)]
    chapters[1] += "\nSee [the map](#the-map).\n"
    chapters[3] += "\nAnd [the map](#the-map) again.\n"
    chapters[5] += "\n## The map\n\nA map.\n"
    book = stack.create_book("\n".join(chapters))
    counted = count_pieces(monkeypatch)
    _artifact(stack, book, fmt)
    renamed = "\n".join([*chapters[:5], chapters[5].replace("## The map", "## The chart")])
    assert stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": renamed}).status == 200
    data, polled = _artifact(stack, book, fmt)
    # Chapters 2 and 4 link to it (now to nowhere), and chapter 6 holds it; 1, 3 and 5 are reused.
    assert counted[-1] == CacheCounts(hits=3, misses=3)
    assert [w["chapter"] for w in polled["warnings"]] == [2, 4]
    again, _ = _artifact(stack, book, fmt)
    assert counted[-1] == CacheCounts(hits=6) and again == data


def test_every_internal_link_of_the_docx_goes_to_its_headings_bookmark_as_pandoc_reads_it(
    stack: Stack, tmp_path: Path
) -> None:
    book = stack.create_book(BOOK)
    data, polled = _artifact(stack, book, "docx")
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        document = package.read("word/document.xml").decode()
    marks = re.findall(r'<w:bookmarkStart w:id="(\d+)" w:name="([^"]+)"/>', document)
    assert [name for _, name in marks] == _pandoc_heading_ids(BOOK)
    assert len({number for number, _ in marks}) == len(marks)  # each bookmark's id its own
    anchors = re.findall(r'<w:hyperlink w:anchor="([^"]+)">', document)
    assert set(anchors) == INTERNAL
    assert "no-such-section" not in document and polled["warnings"][0]["href"] == "#no-such-section"
    path = tmp_path / "links.docx"
    path.write_bytes(data)
    read = pandoc("-f", "docx", "-t", "json", str(path))
    targets = set(re.findall(r'"#([^"]+)"', read))
    named = set(re.findall(r'\[\s*"([^"]+)"\s*,\s*\[', read))  # every element's id, as pandoc reads them
    assert targets and targets <= named, targets - named


REFERENCES = """# One

See [Two things], [the site][site], [Haskell] and [the second *one*][Two things].
[Not defined] stays as it is written.

# Two things

[Haskell]: https://www.haskell.org

# Three

[site]: https://example.org "Example"
"""


def _pandoc_links(manuscript: str) -> list[str]:
    html = pandoc("-f", "markdown", "-t", "html", "--wrap=none", text=manuscript)
    return re.findall(r'<a href="([^"]+)"', html)


@pytest.mark.parametrize("fmt", ["html", "epub", "docx"])
def test_a_label_names_a_definition_or_a_heading_anywhere_in_the_book_as_pandoc_reads_it(
    stack: Stack, fmt: str
) -> None:
    # pandoc's guide: 40 reference links whose definition sits in another chapter, and 68 implicit header
    # references (`[Some section]`), were printed as their brackets.
    book = stack.create_book(REFERENCES)
    data, polled = _artifact(stack, book, fmt)
    if fmt == "epub":
        data = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chapter-000001.xhtml")
        hrefs = re.findall(r'<a href="([^"]+)"', data.decode())
        expected = ["chapter-000002.xhtml#two-things", "https://example.org", "https://www.haskell.org"]
    elif fmt == "docx":
        document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
        rels = zipfile.ZipFile(io.BytesIO(data)).read("word/_rels/document.xml.rels").decode()
        targets = dict(re.findall(r'Id="(rIdL\d+)"[^>]*Target="([^"]+)"', rels))
        hrefs = [
            f"#{a}" if a else targets[r]
            for a, r in re.findall(r'<w:hyperlink (?:w:anchor="([^"]+)"|r:id="([^"]+)")', document)
        ]
        hrefs = [h for n, h in enumerate(hrefs) if n == 0 or hrefs[n - 1] != h]  # (a hyperlink a styled run)
        expected = ["#two-things", "https://example.org", "https://www.haskell.org"]
    else:
        hrefs = [h for h in re.findall(r'<a href="([^"]+)"', data.decode()) if not h.startswith("#ch-")]
        expected = ["#two-things", "https://example.org", "https://www.haskell.org"]
        assert hrefs == _pandoc_links(REFERENCES)
    assert hrefs == [*expected, expected[0]], hrefs
    assert "[Not defined]" in (data.decode() if fmt != "docx" else document)
    assert "warnings" not in polled


def test_a_definition_changed_in_one_chapter_sets_again_the_chapters_that_use_its_label(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(REFERENCES + "\n# Four\n\nNo labels here.\n")
    counted = count_pieces(monkeypatch)
    _artifact(stack, book, "html")
    moved = (
        REFERENCES.replace('https://example.org "Example"', "https://example.net")
        + "\n# Four\n\nNo labels here.\n"
    )
    assert stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": moved}).status == 200
    data, _ = _artifact(stack, book, "html")
    assert counted[-1] == CacheCounts(
        hits=2, misses=2
    )  # One (which uses [site]) and Three (which defines it)
    assert b'<a href="https://example.net">the site</a>' in data


def _pdf_links(data: bytes, tmp_path: Path) -> tuple[dict[str, tuple[int, float]], list[tuple[int, str]]]:
    """The pdf's named destinations (name: page, top) and its links to one (page, name), as a reader
    resolves them."""
    import pikepdf

    path = tmp_path / "book.pdf"
    path.write_bytes(data)
    with pikepdf.open(path) as pdf:
        pages = {page.objgen: n for n, page in enumerate(pdf.pages)}
        leaves = list(pdf.Root.Names.Dests.Names)  # one leaf: the join writes the tree whole
        named = {
            bytes(k).decode(): (pages[v[0].objgen], float(v[3]))
            for k, v in zip(leaves[::2], leaves[1::2], strict=True)
        }
        links = [
            (n, bytes(annot.A.D).decode())
            for n, page in enumerate(pdf.pages)
            for annot in page.get("/Annots", [])
            if "/A" in annot
            and annot.A.get("/S") == "/GoTo"
            and not bytes(annot.A.D).startswith(b"contents ")
        ]
    return named, links


def test_every_internal_link_of_the_pdf_goes_to_its_headings_named_destination(
    stack: Stack, tmp_path: Path
) -> None:
    book = stack.create_book(BOOK + "\n## Café au lait\n\nSee [the café](#café-au-lait).\n")
    data, polled = _artifact(stack, book, "pdf")
    named, links = _pdf_links(data, tmp_path)
    assert set(named) - {n for n in named if n.startswith("contents ")} == {
        *_pandoc_heading_ids(BOOK),
        "café-au-lait",
    }
    assert {name for _, name in links} == INTERNAL | {"café-au-lait"}
    assert all(name in named for _, name in links)
    # Each goes to its heading's page: a chapter opens a page, and "the-end" is the last chapter's.
    assert named["start"][0] < named["options"][0] < named["the-end"][0]
    assert [w["href"] for w in polled["warnings"]] == ["#no-such-section"]
    text = subprocess.run(
        ["pdftotext", str(tmp_path / "book.pdf"), "-"], capture_output=True, text=True
    ).stdout
    assert "A link to nowhere stays words." in text and "no-such-section" not in text


# A novel as Project Gutenberg's files have it: every note defined at the end of the book, in its last
# chapter, and one chapter with a note of its own of the same label (its own is the one it cites).
NOTES = """# One

The harbour[^harbour] and the light.[^light]

# Two

Again the light.[^light] And the sea.[^own]

[^own]: Chapter two's own note.

# Notes

[^harbour]: Built in 1820,
    of granite.

[^light]: A fixed white light, seen for *fourteen* miles.

[^own]: A note no chapter cites from here.
"""


def _note_texts(data: bytes, fmt: str, tmp_path: Path) -> str:
    """The text a reader sees of the book's notes: pandoc's plain text of the whole file."""
    path = tmp_path / f"book.{fmt}"
    path.write_bytes(data)
    if fmt == "pdf":
        return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True).stdout
    return pandoc("-f", fmt, "-t", "plain", "--wrap=none", str(path))


@pytest.mark.parametrize("fmt", ["html", "epub", "docx", "pdf"])
def test_a_note_defined_in_another_chapter_is_set_where_it_is_cited_as_pandoc_sets_it(
    stack: Stack, fmt: str, tmp_path: Path
) -> None:
    book = stack.create_book(NOTES)
    data, polled = _artifact(stack, book, fmt)
    text = " ".join(_note_texts(data, fmt, tmp_path).split())
    assert "[^" not in text, text
    assert "Built in 1820, of granite." in text and "seen for fourteen miles" in text
    assert "Chapter two’s own note." in text and "A note no chapter cites from here." not in text
    assert text.count("A fixed white light") == 2  # cited in two chapters: set in each, as each is a page
    assert "warnings" not in polled
    pandoc_text = " ".join(pandoc("-f", "markdown", "-t", "plain", "--wrap=none", text=NOTES).split())
    assert "Built in 1820, of granite." in pandoc_text and "[^" not in pandoc_text


def test_a_note_defined_in_another_chapter_sets_again_the_chapters_that_cite_it_when_it_changes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(NOTES)
    counted = count_pieces(monkeypatch)
    _artifact(stack, book, "html")
    changed = NOTES.replace("of granite.", "of sandstone.")
    assert stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": changed}).status == 200
    data, _ = _artifact(stack, book, "html")
    assert counted[-1] == CacheCounts(hits=1, misses=2)  # One (which cites it) and Notes (which defines it)
    assert b"of sandstone." in data and b"of granite." not in data


FILES = """# One

See [the other page](other.html), [its notes](../notes.md#part-2) and [nothing]().
[The site](https://example.org/guide.html) and [a letter](mailto:keeper@example.org) leave the book.
"""


@pytest.mark.parametrize("fmt", ["html", "epub", "docx", "pdf"])
def test_a_link_to_a_file_is_its_words_and_a_warning_and_one_that_leaves_the_book_is_kept(
    stack: Stack, fmt: str, tmp_path: Path
) -> None:
    book = stack.create_book(FILES)
    data, polled = _artifact(stack, book, fmt)
    assert [(w["href"], w["line"], w["text"]) for w in polled["warnings"]] == [
        ("other.html", 3, "the other page"), ("../notes.md#part-2", 3, "its notes"), ("", 3, "nothing"),
    ]  # fmt: skip
    text = " ".join(_note_texts(data, fmt, tmp_path).split())
    assert "See the other page, its notes and nothing." in text, text
    if fmt == "pdf":
        import pikepdf

        with pikepdf.open(tmp_path / "book.pdf") as pdf:
            uris = [
                str(a.A.URI) for p in pdf.pages for a in p.get("/Annots", []) if "/URI" in a.get("/A", {})
            ]
        assert uris == ["https://example.org/guide.html", "mailto:keeper@example.org"]
        return
    hrefs = set(re.findall(r'(?:href|Target)="([^"]*)"', _package_text(data, fmt)))
    assert {"https://example.org/guide.html", "mailto:keeper@example.org"} <= hrefs
    assert not [h for h in hrefs if "other" in h or "notes.md" in h or h == ""], hrefs
    if fmt == "epub":
        report = epubcheck(tmp_path / "book.epub")
        assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


def _package_text(data: bytes, fmt: str) -> str:
    """The html, or every part of the epub's or docx's package, as one text."""
    if fmt == "html":
        return data.decode()
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        return "".join(package.read(n).decode(errors="replace") for n in package.namelist())


DEEP = """# The guide

## Options

### General options

#### Reader options

##### Extensions

###### Typography

# Templates

#### Variables, before any second level
"""


def test_the_epubs_navigation_reaches_every_level_and_its_contents_page_shows_toc_depth(
    stack: Stack, tmp_path: Path
) -> None:
    book = stack.create_book(DEEP)
    export_id = stack.http(
        "POST", f"/books/{book}/exports", body={"format": "epub", "options": {"toc_depth": 2}}
    ).body["id"]
    assert stack.services.builds.build(book, export_id) == "ready"
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None
    data = stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=found[0].path)[
        "Body"
    ].read()
    nav = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/nav.xhtml").decode()
    toc = nav[nav.index('<nav epub:type="toc"') : nav.index("</nav>")]
    # Each heading nested under the one before it of a level above, to the sixth; below toc_depth, hidden.
    assert re.sub(r'<a href="[^"]*">', "<a>", toc.split("</h1>\n")[1]) == (
        '<ol><li><a>The guide</a><ol><li><a>Options</a><ol hidden="hidden"><li><a>General options</a>'
        '<ol hidden="hidden"><li><a>Reader options</a><ol hidden="hidden"><li><a>Extensions</a>'
        '<ol hidden="hidden"><li><a>Typography</a></li></ol></li></ol></li></ol></li></ol></li></ol></li>'
        "<li><a>Templates</a><ol><li><a>Variables, before any second level</a></li></ol></li></ol>"
    )
    assert 'href="chapter-000001.xhtml#typography"' in toc
    path = tmp_path / "deep.epub"
    path.write_bytes(data)
    report = epubcheck(path)
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


def test_a_label_names_a_heading_by_its_inlines_as_written_code_spans_and_all_as_pandoc_matches_them(
    stack: Stack,
) -> None:
    # pandoc's guide: `[YAML metadata blocks][Extension: \`yaml_metadata_block\`]`, 12 such links.
    manuscript = (
        "# Extension: `yaml_metadata_block`\n\ntext\n\n# The *best* part\n\n"
        "See [blocks][Extension: `yaml_metadata_block`], [Extension: yaml_metadata_block],\n"
        "[The *best* part] and [The best part].\n"
    )
    data, _ = _artifact(stack, stack.create_book(manuscript), "html")
    hrefs = [h for h in re.findall(r'<a href="([^"]+)"', data.decode()) if not h.startswith("#ch-")]
    assert hrefs == _pandoc_links(manuscript) == ["#extension-yaml_metadata_block", "#the-best-part"]


def test_a_heading_inside_a_note_takes_no_id_of_the_books_and_shifts_none(stack: Stack) -> None:
    manuscript = (
        "# One\n\nText.[^a] See [after](#after).\n\n[^a]: A note.\n\n    ## Inside the note\n\n"
        "## After\n\nthe end\n"
    )
    data, polled = _artifact(stack, stack.create_book(manuscript), "html")
    html = data.decode()
    assert '<h2 id="after">After</h2>' in html and '<a href="#after">after</a>' in html
    assert "Inside the note" in html and 'id="inside-the-note"' not in html
    assert "warnings" not in polled


class _FromTheStartIsAWalk(list):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("walked from the list's start")


def test_a_links_words_are_read_from_the_link_on_never_from_the_paragraphs_start() -> None:
    # A paragraph of 3 MB of links to nowhere took 62 s: each link's words were read by walking every
    # token before it.
    from markdown_it.token import Token

    from bindery.engine.anchors import link_words

    tokens = _FromTheStartIsAWalk(
        [Token("text", "", 0), Token("link_open", "a", 1), Token("text", "", 0), Token("link_close", "a", -1)]
    )
    tokens[2].content = "the words"
    assert link_words(tokens, 1) == "the words"


UNICODE = (
    "# Start\n\n[Café] [words][Café] [Über Heading] [a](#café) [b](#über-id) [c](#日本語)\n\n## Café\n\n"
)
UNICODE += "## Über Heading {#über-id}\n\n## 日本語\n"


def test_links_to_headings_of_any_script_land_in_the_pdf_and_the_docx(stack: Stack, tmp_path: Path) -> None:
    # The pdf's implicit references went to a mis-encoded name, and the docx's explicit ones to a
    # %-encoded bookmark: both landed nowhere.
    book = stack.create_book(UNICODE)
    data, polled = _artifact(stack, book, "pdf")
    named, links = _pdf_links(data, tmp_path)
    assert sorted(name for _, name in links) == sorted(
        ["café", "café", "über-id", "café", "über-id", "日本語"]
    )
    assert all(name in named for _, name in links) and "warnings" not in polled
    data, polled = _artifact(stack, book, "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    marks = set(re.findall(r'<w:bookmarkStart w:id="\d+" w:name="([^"]+)"/>', document))
    anchors = re.findall(r'<w:hyperlink w:anchor="([^"]+)">', document)
    assert sorted(anchors) == sorted(["café", "café", "über-id", "café", "über-id", "日本語"])
    assert set(anchors) <= marks and "warnings" not in polled


def test_a_heading_never_takes_an_id_bindery_gives_its_chapters_and_notes(
    stack: Stack, tmp_path: Path
) -> None:
    # `## Ch 2` was `ch-2`, the second chapter's section's id, and `## Fn Ch1 1` a note's: epubcheck
    # refused the duplicates, and the contents' link went to the heading.
    manuscript = (
        "# Prologue\n\nA claim[^1]. See [chapter two](#ch-2).\n\n## Ch 2\n\nx\n\n## Fn Ch1 1 {#lower.id}\n\n"
        "y\n\n## Fn Ch1 1\n\n[^1]: The note.\n\n# The Real Second Chapter\n\nText [z](#lower.id).\n"
    )
    book = stack.create_book(manuscript)
    data, _ = _artifact(stack, book, "html")
    ids = re.findall(r'\bid="([^"]+)"', data.decode())
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert '<h2 id="ch-2-1">Ch 2</h2>' in data.decode() and '<h2 id="lower.id">' in data.decode()
    assert '<h2 id="fn-ch1-1-1">Fn Ch1 1</h2>' in data.decode()
    data, _ = _artifact(stack, book, "epub")
    (tmp_path / "ids.epub").write_bytes(data)
    report = epubcheck(tmp_path / "ids.epub")
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


def test_a_docx_link_of_styled_words_is_one_hyperlink_as_pandoc_reads_one_link(
    stack: Stack, tmp_path: Path
) -> None:
    # Each run of a link's words was a hyperlink of its own: pandoc read `the \`code\` here` back as three.
    manuscript = "# Start\n\nSee [the `code` *here*](#start) and [a **site**](https://example.org).\n"
    data, _ = _artifact(stack, stack.create_book(manuscript), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert document.count('<w:hyperlink w:anchor="start">') == 1 and document.count("<w:hyperlink r:id=") == 1
    (tmp_path / "one.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "markdown", "--wrap=none", str(tmp_path / "one.docx"))
    assert "[the `code` *here*](#start)" in read and "[a **site**](https://example.org)" in read, read
