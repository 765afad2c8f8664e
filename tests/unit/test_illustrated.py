"""Real books: metadata, a cover and images, through every format and every validator a reader trusts.

The illustrated book has a cover, five images of the four accepted types (one of them large), an image
the book never got, an image with empty alt text and full metadata with an ISBN; the Arabic book is set
right to left. Each goes through the API as a caller would (assets uploaded, checked, adopted), is built
by the worker, and its artifacts are checked by epubcheck, Ace, qpdf, pdftotext, pdfimages and an HTML
parser (every image embedded, nothing fetched from outside).
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import io
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bindery.objects import upload_key
from tests.books.illustrated import Illustrated, arabic, lighthouse
from tests.unit.conftest import Reply, Stack
from tests.validators import ace, epubcheck, pdfimages, pdfinfo, pdftotext, qpdf_check, structure_problems

FORMATS = ("html", "epub", "pdf", "markdown", "docx")  # the docx's own checks: tests/unit/test_docx.py


def add_asset(
    stack: Stack, book: str, name: str, content_type: str, data: bytes, declared: str | None = None
) -> Reply:
    """What a caller does: ask for an upload, PUT the bytes to it, then ask for them to be adopted."""
    ticket = stack.http(
        "POST",
        f"/books/{book}/assets",
        body={"name": name, "content_type": declared or content_type, "size": len(data)},
    )
    assert ticket.status == 201, ticket.body
    # What the caller's PUT to the presigned URL does, with the headers the answer told it to send.
    stack.objects.put_bytes(
        upload_key(book, ticket.body["upload_id"]), data, ticket.body["headers"]["Content-Type"]
    )
    return stack.http("PUT", f"/books/{book}/assets/{name}", body={"upload_id": ticket.body["upload_id"]})


def make(stack: Stack, spec: Illustrated) -> str:
    reply = stack.http(
        "POST", "/books", body={"title": spec.title, "manuscript": spec.manuscript, "metadata": spec.metadata}
    )
    assert reply.status == 201, reply.body
    book = str(reply.body["id"])
    for name, (content_type, data) in spec.assets.items():
        adopted = add_asset(stack, book, name, content_type, data)
        assert adopted.status == 200, adopted.body
    if "images/cover.jpg" in spec.assets:
        edited = stack.http("PATCH", f"/books/{book}", body={"metadata": {"cover": "images/cover.jpg"}})
        assert edited.status == 200, edited.body
    return book


def export(
    stack: Stack, book: str, fmt: str, options: dict[str, Any] | None = None
) -> tuple[dict[str, Any], bytes]:
    body: dict[str, Any] = {"format": fmt, **({"options": options} if options else {})}
    export_id = stack.http("POST", f"/books/{book}/exports", body=body).body["id"]
    stack.build(book, export_id)
    view = stack.poll(book, export_id).body
    assert view["state"] == "ready", view
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None
    path = found[0].path
    data = stack.objects.client.get_object(Bucket=stack.exports.settings.bucket, Key=path)["Body"].read()
    return view, data


def _pixels(data: bytes) -> bytes:
    from PIL import Image

    return Image.open(io.BytesIO(data)).convert("RGB").tobytes()


class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.external: list[str] = []
        self.root: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "html":
            self.root = found
        if tag == "img":
            self.images.append(found)
        for name in ("src", "href"):
            value = found.get(name) or ""
            if tag != "a" and name in found and not value.startswith(("data:", "#")):
                self.external.append(f"<{tag} {name}={value[:80]}>")


@pytest.mark.slow(40)
def test_an_illustrated_book_in_every_format_passes_every_validator(stack: Stack, tmp_path: Path) -> None:
    spec = lighthouse()
    book = make(stack, spec)
    got = stack.http("GET", f"/books/{book}").body
    assert got["identifier"] == "urn:isbn:9780306406157" and got["metadata"]["identifier"] == "9780306406157"
    assert got["metadata"]["cover"] == "images/cover.jpg" and got["revision"] == 1 + len(spec.assets) + 1
    listed = {a["name"]: a for a in got["assets"]}
    assert set(listed) == set(spec.assets)
    assert listed["images/coast.png"] == {
        "name": "images/coast.png", "content_type": "image/png", "width": 640, "height": 400,
        "size_bytes": len(spec.assets["images/coast.png"][1]),
    }  # fmt: skip
    shown = {name: data for name, (_, data) in spec.assets.items()}

    views = {}
    for fmt in FORMATS:
        view, data = export(stack, fmt=fmt, book=book)
        views[fmt] = view
        # The checksum a poll shows is the bytes' own, as the worker computed it streaming them.
        assert view["sha256"] == hashlib.sha256(data).hexdigest(), fmt
        # The image the book never got makes the export incomplete, and the poll names it and its chapter;
        # the image with empty alt text builds, and is a warning.
        assert view["complete"] is False, fmt
        assert view["missing_images"] == [
            {"chapter": 2, "chapter_title": "The Keeper", "name": "images/lost-survey.png"}
        ], fmt
        assert view["warnings"] == [{"code": "empty_alt", "chapter": 1, "name": "images/map.gif"}], fmt
        (tmp_path / f"book.{fmt}").write_bytes(data)

    # html: every image embedded, byte for byte, and nothing fetched from outside.
    page = _Page()
    page.feed((tmp_path / "book.html").read_text())
    assert page.external == [] and page.root == {"lang": "en-GB", "dir": "ltr"}
    embedded = [base64.b64decode(str(img["src"]).split(",", 1)[1]) for img in page.images]
    assert sorted(embedded) == sorted(shown.values())  # five in the text and the cover in the header
    assert '<meta name="author" content="Ada Lovelace, Grace Hopper">' in (tmp_path / "book.html").read_text()

    # epub: valid, accessible, its images in the package with their own media types.
    report = epubcheck(tmp_path / "book.epub")
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]
    violations, ace_report = ace(tmp_path / "book.epub", tmp_path / "ace")
    assert violations == [], violations
    with zipfile.ZipFile(tmp_path / "book.epub") as epub:
        opf = epub.read("OEBPS/content.opf").decode()
        packaged = sorted(epub.read(n) for n in epub.namelist() if n.startswith("OEBPS/images/"))
    # EPUB 3.2 has no WebP among its core media types: the WebP goes in as the PNG of its very pixels.
    webp = shown["images/harbour.webp"]
    as_png = [data for data in packaged if data not in shown.values()]
    assert len(packaged) == len(shown) and len(as_png) == 1 and as_png[0].startswith(b"\x89PNG")
    assert _pixels(as_png[0]) == _pixels(webp)
    assert sorted(d for d in packaged if d in shown.values()) == sorted(
        d for d in shown.values() if d != webp
    )
    for content_type in ("image/png", "image/jpeg", "image/gif"):
        assert f'media-type="{content_type}"' in opf, content_type
    assert "image/webp" not in opf
    assert re.search(
        r'<item id="img-\w+" href="images/\w+\.jpg" media-type="image/jpeg" properties="cover-image"/>', opf
    )
    assert '<dc:identifier id="book-id">urn:isbn:9780306406157</dc:identifier>' in opf
    assert opf.count("<dc:creator") == 2 and "<dc:language>en-GB</dc:language>" in opf
    assert "<dc:date>2026-06-28</dc:date>" in opf and "<dc:subject>Lighthouses</dc:subject>" in opf
    # True of the book as built: it shows images, and one of them has no text alternative.
    assert '<meta property="schema:accessMode">visual</meta>' in opf
    assert "alternativeText" not in opf and "conformsTo" not in opf
    assert "schema:accessModeSufficient" in str(ace_report["a11y-metadata"])

    # pdf: valid, tagged with a sound tree, every image placed (the cover and the five), the metadata in
    # its text, and the cover its first page.
    assert qpdf_check(tmp_path / "book.pdf").returncode == 0
    assert structure_problems(tmp_path / "book.pdf") == []
    assert pdfinfo(tmp_path / "book.pdf")["Tagged"] == "yes"
    import pikepdf

    with pikepdf.open(tmp_path / "book.pdf") as pdf:
        labels = [page.label for page in pdf.pages]
    # The cover and its blank verso, then the title page on a recto, and the body's page 1 on a recto.
    assert labels[:3] == ["Cover", "Inside cover", "i"] and labels.index("1") % 2 == 0
    first_chapter = pdftotext(tmp_path / "book.pdf").split("\f")[labels.index("1")]
    assert first_chapter.lstrip().startswith("The Coast"), first_chapter[:200]
    placed = [row for row in pdfimages(tmp_path / "book.pdf") if row.get("type") == "image"]
    assert len(placed) == len(shown), placed
    text = pdftotext(tmp_path / "book.pdf")
    assert "Ada Lovelace, Grace Hopper" in text and "Every rock had a name." in text

    # markdown: the manuscript and its images, each under the name the manuscript gives it.
    assert views["markdown"]["format"] == "markdown"
    with zipfile.ZipFile(tmp_path / "book.markdown") as bundle:
        assert bundle.read("manuscript.md").decode() == spec.manuscript
        assert {n: bundle.read(n) for n in bundle.namelist() if n != "manuscript.md"} == shown
    download = views["markdown"]["download_url"]
    assert "book.zip" not in download and "The-Lighthouse.zip" in download


@pytest.mark.slow(20)
def test_a_right_to_left_book_is_set_right_to_left_in_every_format(stack: Stack, tmp_path: Path) -> None:
    spec = arabic()
    book = make(stack, spec)
    assert stack.http("GET", f"/books/{book}").body["metadata"]["language"] == "ar"
    for fmt in FORMATS:
        view, data = export(stack, book, fmt)
        assert view["complete"] is True and "warnings" not in view, view
        (tmp_path / f"book.{fmt}").write_bytes(data)
    with zipfile.ZipFile(tmp_path / "book.markdown") as bundle:
        assert bundle.read("manuscript.md").decode() == spec.manuscript
        assert bundle.read("images/dunes.png") == spec.assets["images/dunes.png"][1]
    page = _Page()
    page.feed((tmp_path / "book.html").read_text())
    assert page.root == {"lang": "ar", "dir": "rtl"} and len(page.images) == 1
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "book.epub")
    violations, _ = ace(tmp_path / "book.epub", tmp_path / "ace")
    assert violations == [], violations
    with zipfile.ZipFile(tmp_path / "book.epub") as epub:
        opf = epub.read("OEBPS/content.opf").decode()
        chapter = epub.read("OEBPS/chapter-000001.xhtml").decode()
    assert '<spine page-progression-direction="rtl">' in opf and "<dc:language>ar</dc:language>" in opf
    assert 'xml:lang="ar" lang="ar" dir="rtl"' in chapter
    # Every image has alt text and none is missing: the package may say so.
    assert "alternativeText" in opf and "EPUB Accessibility 1.1" in opf
    assert qpdf_check(tmp_path / "book.pdf").returncode == 0
    assert "السوق" in pdftotext(tmp_path / "book.pdf")


def test_a_book_without_images_is_textual_only(stack: Stack, tmp_path: Path) -> None:
    book = stack.create_book()
    _, data = export(stack, book, "epub")
    with zipfile.ZipFile(io.BytesIO(data)) as epub:
        opf = epub.read("OEBPS/content.opf").decode()
    assert re.findall(r'schema:accessMode">(\w+)<', opf) == ["textual"]
    assert re.findall(r'schema:accessModeSufficient">([\w,]+)<', opf) == ["textual"]
    assert "visual" not in opf and "alternativeText" not in opf
