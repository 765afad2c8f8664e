"""`make run`'s stack as a subprocess on a free port, driven over real HTTP with a real client."""

from __future__ import annotations

import html.parser
import os
import re
import signal
import socket
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
import requests

from tests.e2e.stack import LINK_TTL, RunningStack, auth, start, token
from tests.servers import ROOT, free_port

MANUSCRIPT = "# Первая глава\n\nΚαλημέρα, *world*.\n\n# 第二章\n\nשלום and the end 🎉.\n"


def _wait_ready(stack: RunningStack, book: str, export_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body: dict[str, object] = requests.get(
            f"{stack.api}/books/{book}/exports/{export_id}", headers=auth(stack.token), timeout=10
        ).json()
        if body["state"] != "pending":
            return body
        time.sleep(0.2)
    pytest.fail("the export never left pending")


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_the_banners_curl_lines_work_exactly_as_printed(stack: RunningStack, tmp_path: Path) -> None:
    banner = stack.banner()
    session = banner[banner.index("export API=") :]
    # The session's second line is what the command line reads: `bindery` answers as the banner's user.
    session += f'\n{ROOT}/.venv/bin/bindery me --json | grep -q \'"caller": "demo-user"\' && echo cli-ok'
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", session], cwd=tmp_path, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stderr
    assert '"state":"ready"' in result.stdout
    assert result.stdout.rstrip().endswith("cli-ok")
    page = (tmp_path / "hello.html").read_text()
    assert '<h1 id="hello">Hello</h1>' in page and "<p>Last words.</p>" in page


@pytest.mark.slow(9)
def test_an_html_export_is_built_downloaded_and_expires_with_its_bytes(stack: RunningStack) -> None:
    s3 = stack.client("s3")
    created = requests.post(
        f"{stack.api}/books",
        headers=auth(stack.token),
        json={"title": "Scripts", "manuscript": MANUSCRIPT},
        timeout=10,
    )
    assert created.status_code == 201
    book = created.json()["id"]
    accepted = requests.post(
        f"{stack.api}/books/{book}/exports", headers=auth(stack.token), json={"format": "html"}, timeout=10
    )
    assert accepted.status_code == 202 and accepted.headers["Location"].endswith(accepted.json()["id"])
    export_id = accepted.json()["id"]

    ready = _wait_ready(stack, book, export_id)
    assert ready["state"] == "ready"
    download = requests.get(str(ready["download_url"]), timeout=10)
    assert download.status_code == 200
    assert download.headers["Content-Disposition"] == 'attachment; filename="Scripts.html"'
    parser = _Text()
    parser.feed(download.content.decode("utf-8"))
    text = " ".join(parser.parts)
    for expected in ("Первая глава", "Καλημέρα", "world", "第二章", "שלום and the end 🎉."):
        assert expected in text
    prefix = f"artifacts/{book}/{export_id}/"
    assert len(s3.list_objects_v2(Bucket="bindery-artifacts", Prefix=prefix).get("Contents", [])) == 1

    time.sleep(LINK_TTL)
    expired = requests.get(
        f"{stack.api}/books/{book}/exports/{export_id}", headers=auth(stack.token), timeout=10
    )
    assert expired.json()["state"] == "expired" and expired.json()["download_url"] is None
    deadline = time.monotonic() + 15
    while s3.list_objects_v2(Bucket="bindery-artifacts", Prefix=prefix).get("Contents"):
        assert time.monotonic() < deadline, "the GC never removed the object"
        time.sleep(0.5)
    # The old URL now finds nothing (S3 answers 403 rather than 404 to a caller who may not list the bucket).
    assert requests.get(str(ready["download_url"]), timeout=10).status_code in (403, 404)


def test_another_users_token_gets_404_and_no_token_gets_401(stack: RunningStack) -> None:
    book = requests.post(
        f"{stack.api}/books",
        headers=auth(stack.token),
        json={"title": "Mine", "manuscript": "# A"},
        timeout=10,
    ).json()["id"]
    export_id = requests.post(
        f"{stack.api}/books/{book}/exports",
        headers=auth(stack.token),
        json={"format": "markdown"},
        timeout=10,
    ).json()["id"]
    mallory = auth(token("mallory"))
    missing_book, missing_export = "ffffffffffffffffffff", "fffffffffffffffffffff"

    for path in ("/books/{b}", "/books/{b}/exports", "/books/{b}/exports/{e}"):
        theirs = requests.get(stack.api + path.format(b=book, e=export_id), headers=mallory, timeout=10)
        missing = requests.get(
            stack.api + path.format(b=missing_book, e=missing_export), headers=mallory, timeout=10
        )
        assert theirs.status_code == 404 and theirs.content == missing.content
        assert requests.get(stack.api + path.format(b=book, e=export_id), timeout=10).status_code == 401
    wrong_key = {"Authorization": "Bearer " + token("x")[:-4] + "AAAA"}
    assert requests.get(f"{stack.api}/books/{book}", headers=wrong_key, timeout=10).status_code == 401
    assert requests.get(f"{stack.api}/books/{book}", headers=auth(stack.token), timeout=10).status_code == 200


def test_ctrl_c_stops_the_stack_and_frees_its_port() -> None:
    port = free_port()
    running = start(port)
    assert requests.get(f"{running.api}/books/ffffffffffffffffffff", timeout=10).status_code == 401

    # make itself dies of the SIGINT (-2) or reports its child's (2); the stack below it must stop cleanly.
    assert running.stop() in (0, 2, -signal.SIGINT)

    assert any(re.fullmatch(r"\d\d:\d\d:\d\d stopped in \d+\.\ds", line) for line in running.lines)
    for freed in (port, int(running.aws.rsplit(":", 1)[1])):
        with socket.socket() as probe:
            # SO_REUSEADDR, as a server sets it: the bind raises only if something still listens there,
            # not for connections the stopped server closed (in TIME_WAIT for a minute; seen under load).
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", freed))


@pytest.mark.slow(25)
def test_make_demo_walks_every_format_and_shows_a_link_lapse(stack: RunningStack, tmp_path: Path) -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "demo"],
        cwd=ROOT,
        env={**os.environ, "PORT": str(stack.port), "BINDERY_DEMO_OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    extensions = {"markdown": "md", "html": "html", "epub": "epub", "pdf": "pdf", "docx": "docx"}
    for fmt, ext in extensions.items():
        assert re.search(rf"{fmt}\s+ready .* bytes", result.stdout), result.stdout
        assert (tmp_path / f"lighthouse.{ext}").stat().st_size > 500
    assert "state=expired download_url=None" in result.stdout
    assert "the GC has unlinked the bytes" in result.stdout
    # The illustrated example: its metadata and images, uploaded over real HTTP to presigned PUTs, adopted,
    # and in every format; each download checked against its SHA-256.
    assert "by M. Keeper, urn:isbn:9781402894626, 4 images" in result.stdout, result.stdout
    # Two books, five formats each.
    assert "SHA-256 MISMATCH" not in result.stdout and result.stdout.count("sha256 ok") == 10
    with zipfile.ZipFile(tmp_path / "harbour.epub") as epub:
        names = epub.namelist()
        assert sum(n.startswith("OEBPS/images/") for n in names) == 4
        assert 'properties="cover-image"' in epub.read("OEBPS/content.opf").decode()
    with zipfile.ZipFile(tmp_path / "harbour.markdown.zip") as bundle:
        images = ["images/boats.webp", "images/cover.jpg", "images/fog-days.png", "images/signal-flag.gif"]
        assert sorted(bundle.namelist()) == [*images, "manuscript.md"]
    assert (tmp_path / "harbour.html").read_text().count('src="data:image/') == 5  # the cover twice


@pytest.mark.slow(6)
def test_state_survives_a_restart_when_bindery_data_dir_is_set(tmp_path: Path) -> None:
    data = str(tmp_path / "state")
    first = start(free_port(), BINDERY_DATA_DIR=data)
    try:
        book = requests.post(
            f"{first.api}/books",
            headers=auth(first.token),
            json={"title": "Kept", "manuscript": "# Kept\n\nacross restarts\n"},
            timeout=10,
        ).json()["id"]
        export_id = requests.post(
            f"{first.api}/books/{book}/exports",
            headers=auth(first.token),
            json={"format": "markdown"},
            timeout=10,
        ).json()["id"]
        assert _wait_ready(first, book, export_id)["state"] == "ready"
    finally:
        first.stop()

    second = start(free_port(), BINDERY_DATA_DIR=data)
    try:
        assert (
            requests.get(f"{second.api}/books/{book}", headers=auth(second.token), timeout=10).status_code
            == 200
        )
        polled = requests.get(
            f"{second.api}/books/{book}/exports/{export_id}", headers=auth(second.token), timeout=10
        ).json()
        assert polled["state"] == "ready"
        assert "across restarts" in requests.get(polled["download_url"], timeout=10).text
    finally:
        second.stop()


@pytest.mark.slow(8)
def test_without_bindery_data_dir_a_restart_starts_empty() -> None:
    first = start(free_port())
    try:
        book = requests.post(
            f"{first.api}/books",
            headers=auth(first.token),
            json={"title": "Gone", "manuscript": "# Gone\n"},
            timeout=10,
        ).json()["id"]
    finally:
        first.stop()
    second = start(free_port())
    try:
        assert (
            requests.get(f"{second.api}/books/{book}", headers=auth(second.token), timeout=10).status_code
            == 404
        )
    finally:
        second.stop()
