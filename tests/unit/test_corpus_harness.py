"""The corpus bench's measures (tests/bench/corpus.py) each find what they count, and each can fail: on small
documents made here, one link of each lands and one does not, and a word left out is missing."""

from __future__ import annotations

import collections
import io
import zipfile
from pathlib import Path
from typing import Any

import pikepdf
import pytest

from tests.bench import corpus


def test_an_html_link_lands_only_on_an_id_its_page_has() -> None:
    page = (
        '<nav><a href="#one">One</a></nav><h1 id="one">One</h1>'
        '<p><a href="#one">back</a> <a href="#two">on</a> <a href="https://x.org/#a">x</a>'
    )
    links = corpus.html_links({"book.html": page})  # (the contents' link is the book's, not counted)
    assert links.landed == collections.Counter({"one": 1})
    assert links.unlanded == ["book.html: #two"]


def test_an_epub_link_lands_on_the_id_of_the_page_it_names() -> None:
    pages = {
        "OEBPS/chapter-000001.xhtml": '<h1 id="one">One</h1><a href="chapter-000002.xhtml#sub">a</a>'
        '<a href="chapter-000002.xhtml#one">b</a>',
        "OEBPS/chapter-000002.xhtml": '<h2 id="sub">Sub</h2><a href="#one">c</a>',
    }
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as package:
        for name, page in pages.items():
            package.writestr(name, page)
    links = corpus.html_links(corpus.epub_pages(data.getvalue()))
    assert links.landed == collections.Counter({"sub": 1})
    # An id another page has is not there: the link goes to the page it names.
    assert links.unlanded == [
        "OEBPS/chapter-000001.xhtml: chapter-000002.xhtml#one",
        "OEBPS/chapter-000002.xhtml: #one",
    ]


def test_a_docx_hyperlink_lands_on_a_bookmark_and_a_link_of_two_runs_is_one() -> None:
    document = (
        '<w:body><w:p><w:bookmarkStart w:id="0" w:name="one"/><w:r><w:t>One</w:t></w:r></w:p><w:p>'
        '<w:hyperlink w:anchor="one"><w:r><w:t>see </w:t></w:r></w:hyperlink>'
        '<w:hyperlink w:anchor="one"><w:r><w:rPr/><w:t>code</w:t></w:r></w:hyperlink>'
        '<w:r><w:t> and </w:t></w:r><w:hyperlink w:anchor="one"><w:r><w:t>again</w:t></w:r></w:hyperlink>'
        '<w:hyperlink w:anchor="two"><w:r><w:t>nowhere</w:t></w:r></w:hyperlink></w:p></w:body>'
    )
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as package:
        package.writestr("word/document.xml", document)
    links = corpus.docx_links(data.getvalue())
    assert links.landed == collections.Counter({"one": 2})
    assert links.unlanded == ["w:anchor=two"]


def test_a_pdf_link_lands_on_a_named_destination_the_document_has() -> None:
    pdf = pikepdf.new()
    pdf.add_blank_page()  # the contents, numbered i
    pdf.add_blank_page()  # the body, numbered from 1
    contents, page = pdf.pages
    pdf.Root.PageLabels = pikepdf.Dictionary(
        Nums=[0, pikepdf.Dictionary(S=pikepdf.Name.r), 1, pikepdf.Dictionary(S=pikepdf.Name.D)]
    )
    place = pikepdf.Array([page.obj, pikepdf.Name.XYZ, None, 500, None])
    pdf.Root.Names = pikepdf.Dictionary(Dests=pikepdf.Dictionary(Names=pikepdf.Array(["one", place])))

    def link(**target: Any) -> pikepdf.Dictionary:
        return pdf.make_indirect(
            pikepdf.Dictionary(
                Type=pikepdf.Name.Annot, Subtype=pikepdf.Name.Link, Rect=[0, 0, 9, 9], **target
            )
        )

    contents.obj.Annots = pikepdf.Array([link(Dest=pikepdf.String("one"))])  # the book's link, not counted
    page.obj.Annots = pikepdf.Array(
        [
            link(A=pikepdf.Dictionary(S=pikepdf.Name.GoTo, D=pikepdf.String("one"))),
            link(Dest=pikepdf.String("one")),
            link(A=pikepdf.Dictionary(S=pikepdf.Name.GoTo, D=pikepdf.String("two"))),
            link(Dest=place),  # a place on a page (a note's number): no id, not counted
            link(A=pikepdf.Dictionary(S=pikepdf.Name.URI, URI=pikepdf.String("https://x.org/"))),
        ]
    )
    data = io.BytesIO()
    pdf.save(data)
    links = corpus.pdf_links(data.getvalue())
    assert links.landed == collections.Counter({"one": 2})
    assert links.unlanded == ["page 2: two"]


def test_pandoc_resolves_a_link_to_a_heading_and_an_implicit_reference_not_a_note_or_one_to_nowhere() -> None:
    manuscript = "# One\n\n[back](#one), [One], [nowhere](#two) and a note.[^n]\n\n[^n]: Its words.\n"
    assert corpus.pandoc_resolved(manuscript) == collections.Counter({"one": 2})
    links = corpus.markdown_links(manuscript.encode())  # (as written: its note's links land too)
    assert links.landed["one"] == 2 and links.unlanded == ["manuscript.md: #two"]


def test_a_word_left_out_is_missing_and_a_list_or_note_number_is_no_word() -> None:
    reference = corpus.plain_words("1. Alpha *be*ta\n2. gamma<br/>delta.[^n]\n\n[^n]: The ﬁne print.\n")
    assert reference == corpus.words("alpha beta gamma delta the fine print")
    assert reference - corpus.words("Alpha beta gamma. The fine print") == collections.Counter({"delta": 1})
    assert corpus.words("1The note") == corpus.words("1 the note")


def test_epubchecks_counts_and_messages_are_read_from_its_report() -> None:
    report = (
        "Validating using EPUB version 3.2 rules.\nMessages: 0 fatals / 2 errors / 0 warnings / 0 infos\n\n"
        "ERROR(RSC-012): /tmp/b.epub/OEBPS/chapter-000001.xhtml(8,23): Fragment identifier is not defined.\n"
        "ERROR(RSC-007): /tmp/b.epub/OEBPS/chapter-000001.xhtml(8,53): Referenced resource "
        '"OEBPS/gone.xhtml" could not be found in the EPUB.\n\nCheck finished with errors\n'
    )
    errors, warnings, messages = corpus.epubcheck_counts(report)
    assert (errors, warnings) == (2, 0)
    assert messages[0] == "RSC-012 OEBPS/chapter-000001.xhtml(8,23): Fragment identifier is not defined."
    clean = "No errors or warnings detected.\nMessages: 0 fatals / 0 errors / 0 warnings / 0 infos\n"
    assert corpus.epubcheck_counts(clean) == (0, 0, [])


def test_a_manuscript_that_is_not_there_is_skipped_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corpus.main([str(tmp_path / "not-there.md")]) == 1
    assert f"skipped {tmp_path / 'not-there.md'}: not there" in capsys.readouterr().err
