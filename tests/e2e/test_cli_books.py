"""`bindery books ...` and the downloads, through the installed entry point against the local stack: a book
made from its file by one command (front matter, images, cover), exported to every format under its title,
and then edited, updated, given and relieved of images, and deleted."""

from __future__ import annotations

import json
import re
import urllib.parse
import zipfile
from pathlib import Path

import pytest
import urllib3

from tests.e2e.stack import RunningStack, token
from tests.e2e.test_cli import _bindery, _json
from tests.servers import ROOT
from tests.validators import ace, epubcheck, pdfimages

HARBOUR = ROOT / "examples" / "harbour" / "manuscript.md"


@pytest.mark.slow(45)
def test_examples_harbour_is_one_command_and_every_format_passes_its_checks(
    stack: RunningStack, tmp_path: Path
) -> None:
    book = _json(_bindery(stack, "books", "create", str(HARBOUR), "--json"))
    assert book["title"] == "The Harbour Light"
    assert book["metadata"]["authors"] == ["M. Keeper"] and book["metadata"]["language"] == "en-GB"
    assert book["metadata"]["published"] == "2026-06-28" and book["identifier"] == "urn:isbn:9781402894626"
    assert book["metadata"]["cover"] == "images/cover.jpg"
    names = sorted(a["name"] for a in book["assets"])
    assert names == ["images/boats.webp", "images/cover.jpg", "images/fog-days.png", "images/signal-flag.gif"]
    assert book["chapters_total"] == 2

    files = {}
    for fmt in ("markdown", "html", "epub", "pdf", "docx"):
        ready = _json(_bindery(stack, "export", book["id"], "-f", fmt, "--wait", "--json", cwd=tmp_path))
        assert ready["state"] == "ready" and ready["complete"] is True, ready
        assert not ready.get("missing_images"), ready
        # Saved where it was run, under the API's name for it: the title.
        assert ready["file"] == ready["download_name"] and ready["file"].startswith("The-Harbour-Light.")
        files[fmt] = tmp_path / ready["file"]
        assert files[fmt].stat().st_size == ready["size_bytes"]
    assert files["markdown"].name == "The-Harbour-Light.zip"  # a book with images: the text and each image

    with zipfile.ZipFile(files["markdown"]) as bundle:
        assert sorted(bundle.namelist()) == sorted(["manuscript.md", *names])
    with zipfile.ZipFile(files["docx"]) as docx:
        media = [n for n in docx.namelist() if n.startswith("word/media/")]
        document = docx.read("word/document.xml").decode()
    # Each image stored once; shown on the cover page, then wherever the text shows one (the cover too).
    assert len(media) == 4 and document.count("<wp:docPr ") == 5, media
    assert '<w:pStyle w:val="Cover"/>' in document.split("<w:drawing>", 1)[0]
    report = epubcheck(files["epub"])
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]
    violations, _ = ace(files["epub"], tmp_path / "ace")
    assert violations == [], violations
    with zipfile.ZipFile(files["epub"]) as epub:
        images = [n for n in epub.namelist() if n.startswith("OEBPS/images/")]
        opf = epub.read("OEBPS/content.opf").decode() if "OEBPS/content.opf" in epub.namelist() else ""
    assert len(images) == 4, images  # every image, the cover among them
    assert re.search(r'<item [^>]*properties="cover-image"', opf), opf[:2000]
    placed = {(int(r["width"]), int(r["height"])) for r in pdfimages(files["pdf"]) if r["type"] == "image"}
    assert {(a["width"], a["height"]) for a in book["assets"]} <= placed, placed


def test_a_title_keeps_its_letters_in_the_file_name_and_the_content_disposition(
    stack: RunningStack, tmp_path: Path
) -> None:
    source = tmp_path / "karte.md"
    source.write_text("---\ntitle: Die Karte der Küste\nlang: de\n---\n# Eins\n\nText.\n", encoding="utf-8")
    book = _json(_bindery(stack, "books", "create", str(source), "--json"))
    run = _bindery(stack, "export", book["id"], "-f", "html", "--wait", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "Die-Karte-der-Küste.html").read_text().count("Die Karte der Küste") >= 1
    assert run.stdout.startswith("Die-Karte-der-Küste.html  ")
    # The bar had its total from the start: the book's one chapter.
    assert "building html:   0%|" in run.stderr and "0/1" in run.stderr, run.stderr

    ready = _json(_bindery(stack, "exports", "list", book["id"], "--json"))["exports"][0]
    shown = _json(_bindery(stack, "exports", "show", book["id"], ready["id"], "--json"))
    answer = urllib3.request("GET", shown["download_url"])
    assert answer.status == 200
    assert answer.headers["Content-Disposition"] == (
        "attachment; filename=\"Die-Karte-der-Kuste.html\"; filename*=UTF-8''"
        + urllib.parse.quote("Die-Karte-der-Küste.html")
    )


@pytest.mark.slow(15)
def test_front_matter_mistakes_and_flags_exit_with_their_statuses(
    stack: RunningStack, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text("---\ntitle: T\nauthor: {name: A}\n---\n# One\n")
    run = _bindery(stack, "books", "create", str(bad))
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == f"bindery: {bad}:3: author: expected a string or a list of strings\n"
    as_json = _bindery(stack, "books", "create", str(bad), "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_file"

    good = tmp_path / "good.md"
    good.write_text("---\ntitle: From the file\nauthor: A\n---\n# One\n\ntext\n")
    flagged = _json(
        _bindery(stack, "books", "create", str(good), "--title", "From a flag", "--author", "B", "--json")
    )
    assert (flagged["title"], flagged["metadata"]["authors"]) == ("From a flag", ["B"])
    plain = tmp_path / "plain-file.md"
    plain.write_text("# One\n\ntext\n")
    assert _json(_bindery(stack, "books", "create", str(plain), "--json"))["title"] == "plain-file"

    missing = _bindery(stack, "books", "show", "0" * 20)
    assert missing.returncode == 1 and missing.stderr.startswith("bindery: not_found: ")
    unreachable = _bindery(stack, "me", "--api", "http://127.0.0.1:9")
    assert unreachable.returncode == 3 and unreachable.stderr.count("\n") == 1
    assert "check --api" in unreachable.stderr
    empty = tmp_path / "empty.md"
    empty.write_text("---\ntitle: Nothing yet\n---\n")
    blank = _json(_bindery(stack, "books", "create", str(empty), "--json"))
    ended = _bindery(stack, "export", blank["id"], "-f", "html", "--wait", "--json", cwd=tmp_path)
    assert ended.returncode == 4 and json.loads(ended.stdout)["error"]["code"] == "empty_book"
    assert list(tmp_path.glob("Nothing-yet*")) == []  # no file written
    usage = _bindery(stack, "books", "edit", flagged["id"], "--set", "colour=red")
    assert usage.returncode == 2 and "--set colour=red: expected KEY=VALUE" in usage.stderr


def test_edit_update_assets_and_delete(stack: RunningStack, tmp_path: Path) -> None:
    first = tmp_path / "first.md"
    first.write_text("---\ntitle: Draft\n---\n# One\n\ntext\n")
    book = _json(_bindery(stack, "books", "create", str(first), "--json"))

    edited = _json(
        _bindery(stack, "books", "edit", book["id"], "--set", "author=Anna", "--set", "date=2026-01-02",
                 "--set", "subjects=[\"Sea\", \"Light\"]", "--set", "title=Final", "--json")
    )  # fmt: skip
    assert edited["title"] == "Final" and edited["revision"] == book["revision"] + 1
    assert edited["metadata"]["authors"] == ["Anna"] and edited["metadata"]["subjects"] == ["Sea", "Light"]
    assert edited["metadata"]["published"] == "2026-01-02"
    unset = _json(_bindery(stack, "books", "edit", book["id"], "--unset", "author", "--json"))
    assert unset["metadata"]["authors"] == [] and unset["metadata"]["published"] == "2026-01-02"

    image = ROOT / "examples" / "harbour" / "images" / "signal-flag.gif"
    added = _json(
        _bindery(stack, "books", "assets", "add", book["id"], str(image), "--name", "art/flag.gif", "--json")
    )
    assert [a["name"] for a in added["assets"]] == ["art/flag.gif"]
    listed = _json(_bindery(stack, "books", "assets", "list", book["id"], "--json"))
    assert listed["assets"][0]["content_type"] == "image/gif"
    removed = _bindery(stack, "books", "assets", "rm", book["id"], "art/flag.gif")
    assert removed.returncode == 0 and removed.stdout.strip() == "removed art/flag.gif"
    assert _json(_bindery(stack, "books", "assets", "list", book["id"], "--json"))["assets"] == []

    # A new manuscript with its images: the harbour's, on this book.
    updated = _json(_bindery(stack, "books", "update", book["id"], str(HARBOUR), "--json"))
    assert updated["title"] == "The Harbour Light" and updated["chapters_total"] == 2
    assert len(updated["assets"]) == 4 and updated["metadata"]["cover"] == "images/cover.jpg"
    assert updated["metadata"]["published"] == "2026-06-28"  # the front matter's date replaced the edit's
    # The first file again: its front matter's metadata in place of the harbour's, not merged into it.
    again = _json(_bindery(stack, "books", "update", book["id"], str(first), "--json"))
    kept = {k: v for k, v in again["metadata"].items() if v not in (None, [])}
    assert again["title"] == "Draft" and kept == {"language": "en"}, again["metadata"]  # en: the default

    deleted = _bindery(stack, "books", "delete", book["id"])
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"deleted {book['id']}"
    gone = _bindery(stack, "books", "show", book["id"], "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["error"]["code"] == "not_found"


@pytest.mark.slow(15)
def test_books_list_pages_newest_first_and_forgets_a_deleted_book(
    stack: RunningStack, tmp_path: Path
) -> None:
    reader = token("cli-lister")  # a caller of its own: the module's other tests make books too
    made = []
    for n in range(3):
        source = tmp_path / f"b{n}.md"
        source.write_text(f"---\ntitle: Book {n}\n---\n# One\n\ntext\n")
        made.append(_json(_bindery(stack, "books", "create", str(source), "--json", token=reader))["id"])

    first = _json(_bindery(stack, "books", "list", "--limit", "2", "--json", token=reader))
    rest = _json(_bindery(stack, "books", "list", "--cursor", first["next_cursor"], "--json", token=reader))
    assert [b["id"] for b in first["books"] + rest["books"]] == made[::-1]
    assert rest["next_cursor"] is None
    plain = _bindery(stack, "books", "list", "--limit", "2", token=reader)
    assert plain.returncode == 0
    assert plain.stdout.splitlines() == [
        f"{made[2]}  Book 2  revision 1, 1 chapters",
        f"{made[1]}  Book 1  revision 1, 1 chapters",
        f"more: --cursor {first['next_cursor']}",
    ]

    assert _bindery(stack, "books", "delete", made[1], token=reader).returncode == 0
    left = _json(_bindery(stack, "books", "list", "--json", token=reader))
    assert [b["id"] for b in left["books"]] == [made[2], made[0]]
    bad = _bindery(stack, "books", "list", "--cursor", "nonsense", token=reader)
    assert bad.returncode == 1 and "invalid_cursor" in bad.stderr


def test_a_manuscript_over_five_megabytes_goes_up_as_an_upload_with_a_bar_of_its_bytes(
    stack: RunningStack, tmp_path: Path
) -> None:
    chapter = "The keeper wrote the hour of each trimming, and the weather first. " * 1500  # ~100 KB
    big = tmp_path / "big.md"
    big.write_text(
        "---\ntitle: A Long Log\n---\n" + "".join(f"# Day {n}\n\n{chapter}\n\n" for n in range(60))
    )
    assert big.stat().st_size > 5_000_000
    run = _bindery(stack, "books", "create", str(big))
    assert run.returncode == 0, run.stderr
    assert "A Long Log  revision 2, 60 chapters" in run.stdout  # created empty, then the upload adopted
    # The bar had the upload's whole size as its total, and reached it.
    assert re.search(r"uploading the manuscript: 100%\|[^|]*\| ([\d.]+)M/\1M \[", run.stderr), run.stderr[
        -500:
    ]
