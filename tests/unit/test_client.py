"""bindery_cli.client over real HTTP to a scripted server on 127.0.0.1: retries, keys, errors."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bindery_cli.client import ApiError, Client, LocalFileError, part_path

RESET, STALL = -1, -2


class Script:
    def __init__(self, answers: list[tuple[int, dict[str, str], Any]]):
        self.answers, self.seen = answers, []  # type: ignore[var-annotated]


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            script.seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
            status, headers, body = script.answers.pop(0)
            if status == RESET:  # the connection drops before any answer
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if status == STALL:  # the answer never comes in time
                time.sleep(1.0)
                self.close_connection = True
                return
            payload = b"" if status == 204 else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

        def log_message(self, *_: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()


def test_a_503_and_a_429_are_retried_after_retry_after_with_the_same_idempotency_key(
    server: tuple[str, Script],
) -> None:
    api, script = server
    busy = {"error": {"code": "unavailable", "message": "storage is busy"}}
    script.answers = [
        (503, {"Retry-After": "1"}, busy),
        (429, {"Retry-After": "7"}, {"error": {"code": "too_many_live_exports", "message": "wait"}}),
        (202, {}, {"id": "e1", "state": "pending", "format": "epub"}),
    ]
    slept: list[float] = []
    export = Client(api, "tok", sleep=slept.append).export("book1", "epub")

    assert export["id"] == "e1"
    assert slept == [1.0, 7.0]
    keys = {headers["Idempotency-Key"] for _, _, headers, _ in script.seen}
    assert len(script.seen) == 3 and len(keys) == 1 and len(keys.pop()) == 32
    assert {path for _, path, _, _ in script.seen} == {"/books/book1/exports"}
    assert all(h["Authorization"] == "Bearer tok" for _, _, h, _ in script.seen)


def test_a_refusal_is_an_error_naming_its_code_and_what_to_do(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(404, {}, {"error": {"code": "not_found", "message": "no such book or export"}})]
    with pytest.raises(ApiError) as refused:
        Client(api, "tok", sleep=lambda _: None).export("missing", "html")
    assert (refused.value.status, refused.value.code) == (404, "not_found")
    assert (
        str(refused.value)
        == "not_found: no such book or export (check the book's id: `bindery books list` shows yours)"
    )
    assert len(script.seen) == 1  # a 404 is not retried


def test_retries_stop_after_the_last_try(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(503, {"Retry-After": "0"}, {"error": {"code": "unavailable", "message": "busy"}})] * 3
    with pytest.raises(ApiError) as refused:
        Client(api, "tok", tries=3, sleep=lambda _: None).export("b", "html")
    assert refused.value.code == "unavailable" and len(script.seen) == 3


BOOK = {"id": "b1", "title": "T", "revision": 2, "manuscript_bytes": 1, "created_at": "", "updated_at": "",
        "chapters": []}  # fmt: skip


def test_a_read_whose_connection_drops_is_sent_again(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(RESET, {}, None), (200, {}, BOOK)]
    assert Client(api, "tok", sleep=lambda _: None).get_book("b1")["id"] == "b1"
    assert [(method, path) for method, path, _, _ in script.seen] == [("GET", "/books/b1")] * 2


def test_a_create_whose_answer_never_came_is_sent_again_with_the_same_key(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(STALL, {}, None), (202, {}, {"id": "e1", "state": "pending"})]
    export = Client(api, "tok", timeout=0.3, sleep=lambda _: None).export("b1", "html")
    assert export["id"] == "e1"
    keys = [headers["Idempotency-Key"] for _, _, headers, _ in script.seen]
    assert len(keys) == 2 and keys[0] == keys[1]


def test_a_replacement_whose_answer_never_came_is_not_sent_again(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(STALL, {}, None), (200, {}, BOOK)]
    with pytest.raises(ConnectionError) as lost:
        Client(api, "tok", timeout=0.3, sleep=lambda _: None).replace_manuscript("b1", b"# New\n")
    assert "PUT" in str(lost.value)
    # It might have gone through: a second PUT could answer 412 for the first one's revision.
    assert [(method, path) for method, path, _, _ in script.seen] == [("PUT", "/books/b1/manuscript")]


def test_a_delete_whose_connection_drops_is_sent_again(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(RESET, {}, None), (204, {}, "")]
    Client(api, "tok", sleep=lambda _: None).delete_book("b1")
    assert [method for method, _, _, _ in script.seen] == ["DELETE", "DELETE"]


def test_a_replacement_answered_503_is_not_sent_again(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(503, {"Retry-After": "0"}, {"error": {"code": "unavailable", "message": "busy"}})]
    with pytest.raises(ApiError) as refused:
        Client(api, "tok", sleep=lambda _: None).replace_manuscript("b1", b"# New\n", if_revision=1)
    # A 503 may follow a change that went through: a resend under If-Match would answer 412 for it.
    assert refused.value.code == "unavailable" and len(script.seen) == 1


def test_a_book_delete_whose_resend_finds_nothing_was_done_by_its_first_try(
    server: tuple[str, Script],
) -> None:
    api, script = server
    script.answers = [
        (RESET, {}, None),
        (404, {}, {"error": {"code": "not_found", "message": "no such book"}}),
    ]
    Client(api, "tok", sleep=lambda _: None).delete_book("b1")
    assert [method for method, _, _, _ in script.seen] == ["DELETE", "DELETE"]


def test_a_book_delete_of_nothing_is_still_404(server: tuple[str, Script]) -> None:
    api, script = server
    script.answers = [(404, {}, {"error": {"code": "not_found", "message": "no such book"}})]
    with pytest.raises(ApiError) as refused:
        Client(api, "tok", sleep=lambda _: None).delete_book("b1")
    assert refused.value.status == 404 and len(script.seen) == 1


def test_a_part_left_by_another_build_is_not_resumed(server: tuple[str, Script], tmp_path: Path) -> None:
    """A `.part` from an earlier build of the same name would be resumed into a file that fails its
    checksum: only this file's own `.part` (named after its SHA-256) is resumed."""
    url, script = server
    whole = json.dumps("the new build").encode()
    digest = hashlib.sha256(whole).hexdigest()
    out = tmp_path / "T.html"
    out.with_name("T.html.part").write_bytes(b"the old build's first half")
    script.answers = [(200, {}, "the new build")]
    assert Client(url, "t").download(f"{url}/file", out, sha256=digest) == len(whole)
    assert out.read_bytes() == whole and "Range" not in script.seen[0][2]
    # This file's own .part, cut off halfway: the rest is asked for and appended.
    out.unlink()
    part_path(out, digest).write_bytes(whole[:5])
    script.answers = [(206, {}, "x")]  # the scripted server sends JSON: stand in for the rest by hand
    with pytest.raises(ApiError) as mismatch:
        Client(url, "t").download(f"{url}/file", out, sha256=digest)
    assert script.seen[1][2]["Range"] == "bytes=5-" and mismatch.value.code == "checksum_mismatch"


def test_a_file_that_cannot_be_written_is_a_local_error_naming_it(
    server: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = server
    script.answers = [(200, {}, "file")]
    out = tmp_path / "nodir" / "x.html"
    with pytest.raises(LocalFileError) as raised:
        Client(url, "t").download(f"{url}/file", out)
    assert str(raised.value) == f"cannot write {out}.part: No such file or directory"
