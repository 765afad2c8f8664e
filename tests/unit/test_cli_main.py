"""`bindery` end to end in-process (cli.main) against a scripted server on 127.0.0.1: where its options
go, what it checks before sending anything, and the one line each error is."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bindery_cli import cli, hooks
from bindery_cli.client import Client
from tests.unit.test_client import Script, server  # noqa: F401 (the fixture)

ME = {
    "caller": "u",
    "class": "standard",
    "limits": {
        "live_exports": 1,
        "live_batches": 1,
        "batch_targets": 1,
        "pdf_manuscript_bytes": 1,
        "live_exports_total": 1,
    },
    "live": {"exports": 0, "batches": 0},
    "storage": {"usage_bytes": 0, "budget_bytes": 1},
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("before", [True, False])
def test_api_token_and_json_go_before_the_command_or_after_it(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    before: bool,
) -> None:
    url, script = server
    script.answers = [(200, {}, ME)]
    options = ["--api", url, "--token", "T", "--json"]
    status, out, err = _run(capsys, *([*options, "me"] if before else ["me", *options]))
    assert (status, err) == (0, "")
    assert json.loads(out)["caller"] == "u"
    assert script.seen[0][2]["Authorization"] == "Bearer T"


def test_an_option_before_the_command_is_not_overwritten_by_the_environment(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, script = server
    monkeypatch.setenv("BINDERY_API", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("BINDERY_TOKEN", "from-env")
    script.answers = [(200, {}, ME)]
    status, out, _ = _run(capsys, "--api", url, "me")
    assert status == 0 and out.startswith("u  class standard")
    assert script.seen[0][2]["Authorization"] == "Bearer from-env"


def _ready(url: str, payload: Any) -> list[tuple[int, dict[str, str], Any]]:
    """The answers of `export BOOK -f html --wait`: the export, the book, the ready poll, the file."""
    digest = hashlib.sha256(json.dumps(payload).encode()).hexdigest()
    ready = {
        "id": "E1",
        "format": "html",
        "state": "ready",
        "download_url": f"{url}/file",
        "download_name": "T.html",
        "sha256": digest,
        "built_revision": 1,
    }
    return [
        (202, {}, {"id": "E1", "format": "html", "state": "pending"}),
        (200, {}, {"id": "B", "chapters_total": 1}),
        (200, {}, ready),
        (200, {}, payload),
    ]


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("nodir/x.html", "--out {tmp}/nodir/x.html: no such folder {tmp}/nodir"),
        (".", "--out {tmp}: a directory: name the file to write"),
    ],
)
def test_an_out_that_cannot_be_written_is_refused_before_anything_is_sent(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    out: str,
    expected: str,
) -> None:
    url, script = server
    target = str(tmp_path / out).removesuffix("/.")
    status, stdout, err = _run(
        capsys, "export", "B", "-f", "html", "--wait", "--out", target, "--api", url, "--token", "T"
    )
    assert (status, stdout, script.seen) == (2, "", [])
    assert err.startswith("bindery: " + expected.format(tmp=tmp_path)), err
    assert list(tmp_path.iterdir()) == []  # no stray .part


def test_a_local_write_failure_names_the_path_and_the_reason_not_the_network(
    server: tuple[str, Script],  # noqa: F811
    tmp_path: Path,
) -> None:
    """`ulimit -f`: the file grows past the limit while it is written."""
    url, script = server
    script.answers = _ready(url, "x" * 100_000)
    program = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from bindery_cli import cli\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    target = tmp_path / "x.html"
    argv = ["export", "B", "-f", "html", "--wait", "-o", str(target), "--api", url, "--token", "T"]
    run = subprocess.run([sys.executable, "-c", program, *argv], capture_output=True, text=True, check=False)
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.splitlines()[-1:]
    assert line.startswith(f"bindery: cannot write {target}") and line.endswith(": File too large"), line
    assert "network" not in run.stderr
    assert not target.exists()


def test_out_dash_writes_the_checked_file_to_stdout_and_the_summary_to_stderr(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, script = server
    script.answers = _ready(url, "<p>the book</p>")
    status, stdout, err = _run(
        capsys, "export", "B", "-f", "html", "--wait", "-o", "-", "--api", url, "--token", "T"
    )
    assert status == 0, err
    assert stdout == json.dumps("<p>the book</p>")
    assert "stdout  17 bytes  html, revision 1" in err and ": checked" in err


BOOK = {"id": "B1", "title": "T", "revision": 1, "chapters": [], "chapters_total": 1}


@pytest.mark.parametrize(
    ("deleted", "note"),
    [
        ((204, {}, None), "the book B1 it made was deleted: nothing is left"),
        (
            (500, {}, {"error": {"code": "internal", "message": "boom"}}),
            "the book B1 it made is left half-made (internal: boom): `bindery books delete B1`",
        ),
    ],
)
def test_a_create_that_fails_after_the_book_was_made_deletes_it_and_says_so(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    deleted: tuple[int, dict[str, str], Any],
    note: str,
) -> None:
    url, script = server
    (tmp_path / "map.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    (tmp_path / "book.md").write_text("# One\n\n![map](map.png)\n")
    refused = {"error": {"code": "asset_too_large", "message": "map.png is too large"}}
    script.answers = [(201, {}, BOOK), (413, {}, refused), deleted]
    status, out, err = _run(
        capsys, "books", "create", str(tmp_path / "book.md"), "--api", url, "--token", "T"
    )
    assert (status, out) == (1, "")
    assert err.splitlines()[-1] == f"bindery: asset_too_large: map.png is too large; {note}"
    assert [(method, path) for method, path, *_ in script.seen][-1] == ("DELETE", "/books/B1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "X", "-f", "odt"], "bindery export: argument --format/-f: invalid choice: 'odt'"),
        (["books", "list", "--limit", "abc"], "bindery books list: argument --limit: invalid int value"),
        (["batch", "create", "X:odt"], "X:odt: no format 'odt': one of markdown, html, epub, pdf, docx"),
        (
            ["export", "X", "-f", "html", "--option", "toc_depth=2", "--option", "toc_depth=3"],
            "--option toc_depth given twice",
        ),
    ],
)
def test_under_json_an_argument_mistake_is_json_on_stdout_and_nothing_is_sent(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    url, script = server
    try:
        status, out, err = _run(capsys, *argv, "--json", "--api", url, "--token", "T")
    except SystemExit as exited:  # argparse's own exit
        status, (out, err) = int(exited.code or 0), capsys.readouterr()
    assert (status, err, script.seen) == (2, "", [])
    error = json.loads(out)["error"]
    assert error["code"] == "usage" and error["message"].startswith(message), error


@pytest.mark.parametrize("status", [200, 501])
def test_a_server_that_is_not_bindery_is_one_line_not_its_page(
    capsys: pytest.CaptureFixture[str], status: int
) -> None:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if status != 200:
                self.send_error(status)  # http.server's own multi-line HTML page
                return
            page = b"<!DOCTYPE html>\n<html>\n<body>hello</body>\n</html>\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        api = f"http://127.0.0.1:{httpd.server_address[1]}"
        status_, out, err = _run(capsys, "me", "--api", api, "--token", "T")
    finally:
        httpd.shutdown()
    assert (status_, out) == (1, "")
    assert err == f"bindery: http_{status}: the answer is not Bindery's JSON (check --api)\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["me", "--api", "127.0.0.1:3100"], "--api 127.0.0.1:3100: give --api with http:// or https://"),
        (["books", "show", ""], "BOOK: empty: give its id"),
        (["exports", "show", "B", " "], "EXPORT: empty: give its id"),
    ],
)
def test_an_api_without_a_scheme_or_an_empty_id_is_refused_before_anything_is_sent(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    url, script = server
    monkeypatch.setenv("BINDERY_API", url)
    monkeypatch.setenv("BINDERY_TOKEN", "T")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # urllib3's FutureWarning for a URL without a scheme
        status, out, err = _run(capsys, *argv)
    assert (status, out, script.seen) == (2, "", [])
    assert err.startswith(f"bindery: {message}"), err


def _env(monkeypatch: pytest.MonkeyPatch, url: str, folder: Path) -> None:
    monkeypatch.setenv("BINDERY_API", url)
    monkeypatch.setenv("BINDERY_TOKEN", "T")
    monkeypatch.chdir(folder)


def test_export_wait_prints_its_id_and_on_ctrl_c_how_to_go_on(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    script.answers = _ready(url, "x")[:2]

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "wait", interrupted)
    status, out, err = _run(capsys, "export", "B", "-f", "html", "--wait")
    assert (status, out) == (130, "")
    assert err.splitlines()[0] == "bindery: export E1 requested for B"
    assert err.splitlines()[-1] == (
        "bindery: interrupted: export E1 goes on; `bindery exports show B E1`, "
        "then `bindery exports download B E1`"
    )


def test_exports_download_fetches_a_ready_export_under_its_name_and_shows_its_warnings(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    answers = _ready(url, "<p>x</p>")[2:]
    answers[0][2]["warnings"] = [{"code": "empty_alt", "chapter": 2, "name": "images/map.png"}]
    answers[0][2]["warnings_total"] = 3
    script.answers = answers
    status, out, err = _run(capsys, "exports", "download", "B", "E1")
    assert status == 0, err
    assert (tmp_path / "T.html").read_text() == json.dumps("<p>x</p>")
    assert out.startswith("T.html  10 bytes  html, revision 1")
    assert "\nwarnings: images/map.png (chapter 2): empty_alt, and 2 more\n" in out
    assert [p.name for p in tmp_path.iterdir()] == ["T.html"]


def test_a_book_deleted_during_export_wait_ends_it_with_4_saying_so(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    gone = {"error": {"code": "not_found", "message": "no such book or export"}}
    script.answers = [*_ready(url, "x")[:2], (404, {}, gone)]
    status, out, err = _run(capsys, "export", "B", "-f", "html", "--wait")
    assert (status, out) == (4, "")
    assert err.splitlines()[-1] == (
        "bindery: export E1 deleted: book_deleted (the book was deleted while its export was building: "
        "nothing is left to download)"
    )


def test_a_wait_the_api_asks_for_is_noted_on_stderr_but_not_under_json(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    busy = {"error": {"code": "too_many_requests", "message": "slow down"}}
    script.answers = [(429, {"Retry-After": "1"}, busy), (200, {}, ME)]
    status, _, err = _run(capsys, "me")
    assert (status, err) == (0, "bindery: note: too many requests (429): waiting 1 s, as the API asks\n")
    script.answers = [(429, {"Retry-After": "1"}, busy), (200, {}, ME)]
    status, out, err = _run(capsys, "me", "--json")
    assert (status, err) == (0, "") and json.loads(out)["caller"] == "u"


def test_books_update_takes_the_front_matters_metadata_in_place_of_the_books(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    held = {**BOOK, "metadata": {"publisher": "P", "authors": ["A"], "cover": "c.png"}, "assets": []}
    (tmp_path / "new.md").write_text("---\ntitle: New\nauthor: B\n---\n# One\n")
    script.answers = [(200, {}, held), (200, {}, {**BOOK, "revision": 2}), (200, {}, {**BOOK, "revision": 3})]
    status, _, err = _run(capsys, "books", "update", "B1", "new.md")
    assert status == 0, err
    method, path, headers, body = script.seen[-1]
    assert (method, path, headers["If-Match"]) == ("PATCH", "/books/B1", '"2"')
    assert json.loads(body) == {
        "title": "New",
        "metadata": {"authors": ["B"], "cover": None, "publisher": None},
    }


def test_a_front_matter_key_not_read_is_a_note_not_an_error(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    (tmp_path / "x.md").write_text("---\ntitle: T\nfoo: 1\n---\n# One\n")
    script.answers = [(201, {}, BOOK)]
    status, _, err = _run(capsys, "books", "create", "x.md")
    assert (status, err) == (0, "bindery: note: x.md: front matter keys not read: foo\n")


@pytest.mark.parametrize(
    ("argv", "answer", "expected"),
    [
        (
            ["batch", "show", "X"],
            (404, "not_found", "no such batch"),
            "not_found: no such batch (check the batch's id: `bindery batch list` shows yours)",
        ),
        (
            ["webhooks", "redeliver", "W1", "D9"],
            (404, "not_found", "no such delivery"),
            "not_found: no such delivery (check the ids: `bindery webhooks deliveries ENDPOINT` lists its "
            "deliveries)",
        ),
        (
            ["webhooks", "show", "W1"],
            (404, "not_found", "no such endpoint"),
            "not_found: no such endpoint (check the endpoint's id: `bindery webhooks list` shows yours)",
        ),
        (
            ["webhooks", "redeliver", "W1", "D1"],
            (409, "endpoint_disabled", "the endpoint is disabled"),
            "endpoint_disabled: the endpoint is disabled "
            "(enable it first: `bindery webhooks edit W1 --enable`)",
        ),
    ],
)
def test_a_refusal_names_what_to_check_for_its_own_resource_and_json_does_not_repeat_the_code(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    answer: tuple[int, str, str],
    expected: str,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    status, code, message = answer
    script.answers = [(status, {}, {"error": {"code": code, "message": message}})]
    assert _run(capsys, *argv) == (1, "", f"bindery: {expected}\n")
    script.answers = [(status, {}, {"error": {"code": code, "message": message}})]
    failed, out, _ = _run(capsys, *argv, "--json")
    assert (failed, json.loads(out)) == (1, {"error": {"code": code, "message": expected.split(": ", 1)[1]}})


def test_events_shows_the_head_then_ends_with_the_cursor_to_pass_next(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    event = {"cursor": "3", "created_at": "2026-12-03T14:00:00Z", "type": "bindery.export.ready", "data": {}}
    script.answers = [(200, {}, {"events": [event], "next_cursor": "3", "head": "28"})]
    status, out, _ = _run(capsys, "events", "--after", "2")
    assert status == 0 and out.splitlines()[-2:] == ["head 28", "next: --after 3"]


def test_follow_keeps_trying_while_the_api_does_not_answer_and_says_where_to_resume(
    capsys: pytest.CaptureFixture[str],
) -> None:
    event = {"cursor": "5", "created_at": "t", "type": "bindery.export.ready", "data": {}}
    answers: list[Any] = [
        ConnectionError("GET /events: no answer after 5 tries: refused"),
        ConnectionError("GET /events: no answer after 5 tries: refused"),
        {"events": [event], "next_cursor": "5", "head": "5"},
    ]

    class Feed:
        def events(self, after: str | None, limit: int | None) -> Any:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    waits: list[float] = []
    cursor = hooks.Cursor("4")
    with pytest.raises(KeyboardInterrupt), hooks._resumable(cursor):
        for seen in hooks.follow(Feed(), cursor, sleep=waits.append):  # type: ignore[arg-type]
            assert seen == event
            raise KeyboardInterrupt  # Ctrl-C while the event is being shown
    assert waits == [1.0, 2.0]  # backing off, not giving up
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "bindery: note: no answer from the API (refused): trying again in 1 s"
    assert err[-2:] == ["bindery: note: the API answers again", "bindery: resume with --after 4"]


def test_batch_wait_prints_its_id_and_on_ctrl_c_how_to_go_on(
    server: tuple[str, Script],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, script = server
    _env(monkeypatch, url, tmp_path)
    target = {"export_id": "E1", "book_id": "B1", "format": "html", "state": "pending", "failure_code": None}
    batch = {"id": "X1", "status": "running", "targets": [target], "targets_total": 1, "targets_done": 0}
    script.answers = [(202, {}, batch), (200, {}, BOOK)]

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "wait_batch", interrupted)
    status, out, err = _run(capsys, "batch", "create", "B1:html", "--wait")
    assert (status, out) == (130, "")
    assert err.splitlines()[0] == "bindery: batch X1 requested"
    assert err.splitlines()[-1] == "bindery: interrupted: batch X1 goes on; `bindery batch show X1`"
