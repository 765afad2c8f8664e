"""The local stack is its owner's (issue 46, item 5), in-process: the gateway refuses a request addressed to
any name but its own, or sent by another site's page, before anything else, the embedded AWS does too, and
the stack's secret is made for each run and handed to its owner alone.
tests/e2e/test_local_stack_is_its_owners.py drives the same over real HTTP."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from bindery_local import hosts, tokens
from bindery_local.aws import owner_only
from bindery_local.gateway import Gateway, serve
from bindery_local.template import routes
from tests.servers import ROOT

PORT = 3000
KEY = "k" * 43


@pytest.fixture
def gateway() -> tuple[Gateway, list[str]]:
    called: list[str] = []

    def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
        called.append(function)
        return {"statusCode": 200, "body": "{}"}

    return Gateway(routes(), invoke, lambda line: None, key=KEY, port=PORT), called


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv(tokens.SECRET_VARIABLE, raising=False)
    monkeypatch.delenv("BINDERY_API", raising=False)
    return tmp_path / "bindery"


@pytest.mark.parametrize(
    "host",
    [
        "rebound.attacker.example:3000",  # a page that rebound its name to 127.0.0.1
        "rebound.attacker.example",
        "127.0.0.1:3001",  # another server's port on the same name
        "127.0.0.1",  # port 80's name, not this one's
        "[::1]:3000",  # the stack does not listen there
        "localhost.attacker.example:3000",
        "",
        None,  # no Host at all
    ],
)
def test_a_request_addressed_to_another_name_is_refused_before_any_handler(
    gateway: tuple[Gateway, list[str]], host: str | None
) -> None:
    given, called = gateway
    headers = {"authorization": f"Bearer {tokens.mint('alice', key=KEY)}", "content-type": "application/json"}
    if host is not None:
        headers["host"] = host
    for method, path in (("POST", "/books"), ("GET", "/docs"), ("GET", "/nowhere")):
        status, out_headers, body = given.handle(method, path, headers, b'{"title": "t"}', "127.0.0.1")
        assert status == 421 and out_headers["Content-Type"] == "application/json"
        assert json.loads(body)["error"]["code"] == hosts.HOST_NOT_ALLOWED
    assert called == []


@pytest.mark.parametrize("host", ["127.0.0.1:3000", "localhost:3000", "LOCALHOST:3000"])
def test_the_stacks_own_names_reach_the_handler_with_a_token_of_its_secret(
    gateway: tuple[Gateway, list[str]], host: str
) -> None:
    given, called = gateway
    for key, status in (("w" * 43, 401), (KEY, 200)):
        headers = {"host": host, "authorization": f"Bearer {tokens.mint('alice', key=key)}"}
        assert given.handle("GET", "/me", headers, b"", "127.0.0.1")[0] == status
    assert len(called) == 1


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("http://evil.example:3000/me", 421),  # absolute form: its authority, not Host, names the server
        ("http://127.0.0.1:3001/me", 421),
        ("http:///me", 421),
        ("http://localhost:3000/me", 200),
        ("/me", 200),
    ],
)
def test_an_absolute_form_target_is_addressed_to_its_authority(
    gateway: tuple[Gateway, list[str]], target: str, status: int
) -> None:
    # An outside test's: `GET http://evil.example:3000/me` with `Host: 127.0.0.1:3000` was answered 200.
    given, called = gateway
    headers = {"host": "127.0.0.1:3000", "authorization": f"Bearer {tokens.mint('alice', key=KEY)}"}
    assert given.handle("GET", target, headers, b"", "127.0.0.1")[0] == status
    assert len(called) == (status == 200)
    app, answered = owner_only(lambda environ, start: start("200 OK", []) or [b"{}"], lambda: 5000), []
    environ = {"HTTP_HOST": "127.0.0.1:5000", "RAW_URI": target.replace(":3000", ":5000")}
    b"".join(app(environ, lambda line, headers: answered.append(line)))
    assert answered[0][:3] == str(status)


def test_port_80_is_also_named_without_its_port() -> None:
    assert hosts.is_own("localhost", 80) and hosts.is_own("127.0.0.1:80", 80)
    assert not hosts.is_own("localhost", 3000)


def test_the_embedded_aws_answers_only_its_own_name() -> None:
    reached: list[str] = []

    def moto(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        reached.append(environ["HTTP_HOST"])
        start_response("200 OK", [])
        return [b"{}"]

    app, answered = owner_only(moto, lambda: 5000), []
    for host in ("rebound.attacker.example:5000", "127.0.0.1:5001", "127.0.0.1:5000", "localhost:5000"):
        body = b"".join(app({"HTTP_HOST": host}, lambda status, headers: answered.append(status)))
        if answered[-1].startswith("421"):
            assert json.loads(body)["error"]["code"] == hosts.HOST_NOT_ALLOWED
    assert [s[:3] for s in answered] == ["421", "421", "200", "200"]
    assert reached == ["127.0.0.1:5000", "localhost:5000"]


# What a browser sends with a request made by a page of another origin: a form's POST, a fetch, an <img>.
OTHER_PAGES = [
    ("http://evil.example", None),  # a cross-site form or fetch, as Chromium before Sec-Fetch-* or curl
    ("http://evil.example", "cross-site"),
    (None, "cross-site"),  # a GET by <img> or a link: no Origin, but the browser says whose page sent it
    ("null", None),  # a sandboxed frame, a file: page, a redirect across origins
    ("http://127.0.0.1:3001", "same-site"),  # another server's page on this machine: another origin
    ("http://localhost:3001", "same-site"),
    ("https://127.0.0.1:3000", None),  # another scheme is another origin
    ("http://127.0.0.1:3000.evil.example", "cross-site"),
    ("http://127.0.0.1:3000, http://evil.example", None),  # two Origin headers, joined
    ("http://127.0.0.1:3000", "cross-site"),
]
# What the stack's own callers send: curl, the CLI and boto3 send neither; Swagger UI on /docs is the
# server's own origin; a URL typed or pasted in the address bar is "none".
OWN_CALLERS = [
    (None, None),
    ("http://127.0.0.1:3000", "same-origin"),
    ("http://localhost:3000", "same-origin"),
    ("HTTP://LOCALHOST:3000", None),
    (None, "none"),
    (None, "same-site"),  # a link from another port's page to this one: no body, and no answer read
]


def _origin_headers(origin: str | None, fetch_site: str | None) -> dict[str, str]:
    return {
        name: value
        for name, value in (("origin", origin), ("sec-fetch-site", fetch_site))
        if value is not None
    }


@pytest.mark.parametrize(("origin", "fetch_site"), OTHER_PAGES)
def test_a_request_from_another_sites_page_is_refused_before_any_handler(
    gateway: tuple[Gateway, list[str]], origin: str | None, fetch_site: str | None
) -> None:
    # Given the right Host and even a valid token (a form cannot send one, but a refusal must not lean on it)
    given, called = gateway
    headers = {
        "host": "127.0.0.1:3000",
        "authorization": f"Bearer {tokens.mint('alice', key=KEY)}",
        "content-type": "multipart/form-data; boundary=x",
        **_origin_headers(origin, fetch_site),
    }
    for method, path in (("POST", "/books"), ("GET", "/me"), ("GET", "/docs"), ("GET", "/nowhere")):
        status, out_headers, body = given.handle(method, path, headers, b"--x--", "127.0.0.1")
        assert status == 403 and out_headers["Content-Type"] == "application/json"
        assert json.loads(body)["error"]["code"] == hosts.ORIGIN_NOT_ALLOWED
    assert called == []


@pytest.mark.parametrize(("origin", "fetch_site"), OWN_CALLERS)
def test_the_stacks_own_pages_and_callers_without_an_origin_reach_the_handler(
    gateway: tuple[Gateway, list[str]], origin: str | None, fetch_site: str | None
) -> None:
    given, called = gateway
    headers = {
        "host": "localhost:3000",
        "authorization": f"Bearer {tokens.mint('alice', key=KEY)}",
        **_origin_headers(origin, fetch_site),
    }
    assert given.handle("GET", "/me", headers, b"", "127.0.0.1")[0] == 200
    assert given.handle("GET", "/docs", headers, b"", "127.0.0.1")[0] == 200
    assert len(called) == 1


def _form_post(host: str, origin: str | None, fetch_site: str | None) -> dict[str, Any]:
    """The WSGI environ of an unsigned multipart/form-data POST to the bucket, as an HTML form sends it."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/bindery-artifacts",
        "HTTP_HOST": host,
        "CONTENT_TYPE": "multipart/form-data; boundary=x",
    }
    if origin is not None:
        environ["HTTP_ORIGIN"] = origin
    if fetch_site is not None:
        environ["HTTP_SEC_FETCH_SITE"] = fetch_site
    return environ


@pytest.mark.parametrize(("origin", "fetch_site"), OTHER_PAGES)
def test_the_embedded_aws_refuses_another_sites_page(origin: str | None, fetch_site: str | None) -> None:
    reached: list[str] = []

    def moto(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        reached.append(environ["PATH_INFO"])
        start_response("204 No Content", [])
        return [b""]

    port = lambda: 3000  # noqa: E731 (the port OTHER_PAGES name as this server's)
    answered: list[str] = []
    body = b"".join(
        owner_only(moto, port)(
            _form_post("127.0.0.1:3000", origin, fetch_site), lambda s, h: answered.append(s)
        )
    )
    assert answered == ["403 Forbidden"] and reached == []
    assert json.loads(body)["error"]["code"] == hosts.ORIGIN_NOT_ALLOWED


@pytest.mark.parametrize(("origin", "fetch_site"), OWN_CALLERS)
def test_the_embedded_aws_answers_its_own_callers(origin: str | None, fetch_site: str | None) -> None:
    reached: list[str] = []

    def moto(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        reached.append(environ["PATH_INFO"])
        start_response("204 No Content", [])
        return [b""]

    answered: list[str] = []
    list(
        owner_only(moto, lambda: 3000)(
            _form_post("localhost:3000", origin, fetch_site), lambda s, h: answered.append(s)
        )
    )
    assert answered == ["204 No Content"] and reached == ["/bindery-artifacts"]


def test_the_readme_lists_the_local_stacks_refusals_among_its_error_codes() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Error codes", 1)[1].split("\n### ", 1)[0]
    rows = {
        (status, code)
        for status, codes in re.findall(r"^\| (\d{3}) \| (.+?) \|", table, re.M)
        for code in re.findall(r"`([a-z_]+)`", codes)
    }
    assert (str(hosts.MISDIRECTED), hosts.HOST_NOT_ALLOWED) in rows
    assert (str(hosts.FORBIDDEN), hosts.ORIGIN_NOT_ALLOWED) in rows


def test_each_run_makes_its_own_secret_unless_one_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tokens.SECRET_VARIABLE, raising=False)
    first, second = tokens.secret_for_this_run(), tokens.secret_for_this_run()
    assert first != second and len(first) >= tokens.MIN_SECRET_BYTES

    monkeypatch.setenv(tokens.SECRET_VARIABLE, "s" * 32)
    assert tokens.secret_for_this_run() == "s" * 32
    monkeypatch.setenv(tokens.SECRET_VARIABLE, "too-short")
    with pytest.raises(SystemExit, match="9 bytes"):
        tokens.secret_for_this_run()


def test_the_secret_is_kept_where_only_its_owner_reads_it_and_found_by_port(runtime_dir: Path) -> None:
    kept = tokens.keep_for_owner(4000, "http://127.0.0.1:4000", KEY)

    assert kept.parent == runtime_dir
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
    assert tokens.secret("http://127.0.0.1:4000") == KEY
    with pytest.raises(tokens.NoSecret) as missing:
        tokens.secret()  # make run's own port: no stack there
    assert "no local stack runs at http://127.0.0.1:3000" in str(missing.value)
    assert list(runtime_dir.iterdir()) == [kept]  # nothing left aside


def test_a_secret_given_in_the_environment_signs_whatever_runs(
    runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens.keep_for_owner(3000, "http://127.0.0.1:3000", KEY)
    monkeypatch.setenv(tokens.SECRET_VARIABLE, "e" * 32)
    assert tokens.secret() == "e" * 32


def test_a_planted_link_is_replaced_not_written_through(runtime_dir: Path, tmp_path: Path) -> None:
    runtime_dir.mkdir(mode=0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("theirs")
    tokens.secret_file(3000).symlink_to(elsewhere)

    kept = tokens.keep_for_owner(3000, "http://127.0.0.1:3000", KEY)

    assert elsewhere.read_text() == "theirs" and not kept.is_symlink()
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700  # made narrow again


def test_a_stop_takes_away_its_own_secret_only(runtime_dir: Path) -> None:
    kept = tokens.keep_for_owner(3000, "http://127.0.0.1:3000", KEY)
    tokens.forget(3000, "another run's secret, refused its port")
    assert kept.exists()
    tokens.forget(3000, KEY)
    assert not kept.exists()
    tokens.forget(3000, KEY)  # already gone: nothing to do


def test_bindery_token_names_the_missing_stack(runtime_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bindery_cli.cli import main

    assert main(["token", "alice", "--api", "http://127.0.0.1:4999"]) == 3
    assert "no local stack runs at http://127.0.0.1:4999" in capsys.readouterr().err
    tokens.keep_for_owner(4999, "http://127.0.0.1:4999", KEY)
    assert main(["--api", "http://127.0.0.1:4999", "token", "alice"]) == 0
    minted = capsys.readouterr().out.strip()
    assert tokens.verify(f"Bearer {minted}", KEY)["sub"] == "alice"
    assert os.environ.get(tokens.SECRET_VARIABLE) is None


def test_a_file_left_by_a_stack_that_is_gone_is_not_used_and_is_swept_at_the_next_start(
    runtime_dir: Path,
) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    runtime_dir.mkdir(mode=0o700)
    left = tokens.secret_file(3000)
    left.write_text(json.dumps({"api": "http://127.0.0.1:3000", "secret": KEY, "pid": int(gone.stdout)}))

    with pytest.raises(tokens.NoSecret):
        tokens.secret()  # its stack was killed (kill -9): a token signed with it would be refused
    kept = tokens.keep_for_owner(4000, "http://127.0.0.1:4000", KEY)
    assert list(runtime_dir.iterdir()) == [kept]


def test_a_header_value_reaches_the_handler_without_whitespace_at_its_ends() -> None:
    # An outside test's: an Idempotency-Key with a leading space was trimmed (by the HTTP parser) and
    # replayed, one with a trailing space refused; a field's value has no whitespace at its ends (RFC 9110).
    seen: list[dict[str, str]] = []

    class Recording(Gateway):
        def handle(self, method: str, target: str, headers: dict[str, str], body: bytes, ip: str) -> Any:
            seen.append(headers)
            return 200, {"Content-Type": "application/json"}, b"{}"

    server = serve(Recording(routes(), lambda f, e: {}, lambda line: None, key=KEY, port=PORT), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as client:
            client.sendall(
                b"GET /me HTTP/1.1\r\nHost: x\r\nIdempotency-Key:  key-1 \t\r\nConnection: close\r\n\r\n"
            )
            assert client.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        server.shutdown()
        server.server_close()
    assert seen[0]["idempotency-key"] == "key-1"
