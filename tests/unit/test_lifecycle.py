"""The lifecycle end to end through the handlers, over moto."""

from __future__ import annotations

import urllib.parse

from bindery.states import FailureCode, State
from tests.unit.conftest import Stack


def test_an_export_goes_from_submit_to_a_downloadable_html_file(stack: Stack) -> None:
    book = stack.create_book("# Первая\n\nΚείμενο *one*.\n\n# Second\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    accepted = stack.submit(book, "html")
    assert accepted.status == 202
    export_id = accepted.body["id"]
    assert accepted.headers["Location"] == f"/books/{book}/exports/{export_id}"
    assert accepted.headers["Retry-After"] == "2"
    assert accepted.body["state"] == "pending"

    assert stack.build(book, export_id) == {"batchItemFailures": []}

    polled = stack.poll(book, export_id)
    assert polled.status == 200
    assert polled.body["state"] == "ready"
    assert polled.body["book_revision"] == 1 and polled.body["built_revision"] == 1
    assert polled.body["complete"] is True
    url = urllib.parse.urlparse(polled.body["download_url"])
    query = urllib.parse.parse_qs(url.query)
    assert query["response-content-disposition"] == ['attachment; filename="A-Book.html"']
    [key] = stack.objects.keys("artifacts/")
    assert url.path.endswith(key)
    html = stack.objects.read_text(key)
    assert "Первая" in html and "Κείμενο <em>one</em>." in html and "<table>" in html
    assert '<a href="#ch-2">Second</a>' in html
    assert polled.body["size_bytes"] == len(html.encode())
    assert stack.store.exports.live_ids("user-alice") == frozenset()


def test_a_book_with_no_chapters_fails_as_empty_book_and_never_reaches_the_engine(stack: Stack) -> None:
    book = stack.create_book("   \n\n")
    export_id = stack.submit(book, "markdown").body["id"]
    stack.build(book, export_id)
    polled = stack.poll(book, export_id).body
    assert (polled["state"], polled["failure_code"]) == (State.FAILED, FailureCode.EMPTY_BOOK)
    assert stack.objects.keys("artifacts/") == []


def _ready(stack: Stack) -> tuple[str, str]:
    book = stack.create_book(title="Ünïcode & Title")
    export_id = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, export_id)
    return book, export_id


def _expires_param(url: str) -> int:
    return int(urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["X-Amz-Expires"][0])


def test_a_download_url_lives_fifteen_minutes_at_most(stack: Stack) -> None:
    book, export_id = _ready(stack)
    polled = stack.poll(book, export_id).body
    assert _expires_param(polled["download_url"]) == 900
    assert polled["download_expires_at"] < polled["expires_at"]


def test_a_download_url_never_outlives_the_links_promise(stack: Stack) -> None:
    book, export_id = _ready(stack)
    stack.clock.advance(stack.exports.settings.link_ttl_seconds - 100.5)
    polled = stack.poll(book, export_id).body
    assert _expires_param(polled["download_url"]) == 100  # rounded down, never up
    assert polled["download_expires_at"] <= polled["expires_at"]


def test_the_download_name_comes_from_the_title_and_the_formats_extension(stack: Stack) -> None:
    book, export_id = _ready(stack)
    url = stack.poll(book, export_id).body["download_url"]
    disposition = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["response-content-disposition"][0]
    # RFC 6266: an ASCII fallback every client reads, and the title's own letters as RFC 8187's filename*.
    assert disposition == (
        "attachment; filename=\"Unicode-Title.md\"; filename*=UTF-8''%C3%9Cn%C3%AFcode-Title.md"
    )
    assert stack.poll(book, export_id).body["download_name"] == "Ünïcode-Title.md"


def test_a_download_name_keeps_the_letters_of_every_script_and_drops_what_a_path_would_read() -> None:
    from bindery.exports import download_name
    from bindery.objects import attachment

    assert download_name("Die Karte der Küste", "pdf") == "Die-Karte-der-Küste.pdf"
    assert download_name("東京の灯台", "epub") == "東京の灯台.epub"
    assert download_name("हिन्दी किताब", "pdf") == "हिन्दी-किताब.pdf"  # its vowel signs (marks) kept
    assert download_name("../etc/passwd", "md") == "etc-passwd.md"
    assert download_name(' "quoted"\\ ', "html") == "quoted.html"
    assert download_name("...", "pdf") == "book.pdf"
    assert attachment("Die-Karte-der-Küste.pdf") == (
        "attachment; filename=\"Die-Karte-der-Kuste.pdf\"; filename*=UTF-8''Die-Karte-der-K%C3%BCste.pdf"
    )
    # Nothing of the name in ASCII: a neutral fallback, the name itself in filename*.
    assert attachment("東京の灯台.epub").startswith(
        "attachment; filename=\"download.epub\"; filename*=UTF-8''%E6"
    )
    assert attachment("Scripts.html") == 'attachment; filename="Scripts.html"'
    # What the folding dropped takes its separators with it (found by the outside test: "Scripts-.pdf").
    assert attachment("Scripts-世界.pdf").startswith('attachment; filename="Scripts.pdf"; filename*=')
    assert attachment("A-世界-B.pdf").startswith('attachment; filename="A-B.pdf"; filename*=')


def test_a_poll_of_a_pending_export_says_when_to_ask_again(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    polled = stack.poll(book, export_id)
    assert (polled.body["state"], polled.headers["Retry-After"]) == ("pending", "2")
    assert polled.body["book_revision"] == 1 and polled.body["built_revision"] is None
