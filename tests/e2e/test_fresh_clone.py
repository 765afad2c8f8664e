"""The README's first command on a fresh clone: `make run` with nothing built before, every format exported
with the README's own session, and Ctrl-C.

The clone is of the commit this checkout holds (what CI would land), in a temporary folder: `make run`
makes its own .venv there (pip may use its cache; nothing is copied from this checkout), so a dependency
the first command needs but only `make test` sets up (the PDF's fonts were one) fails here. The only
traffic besides pip's is to the stack, on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import pikepdf
import pytest
import requests

from tests.e2e.stack import auth
from tests.servers import ROOT, free_port

FORMATS = ("markdown", "html", "epub", "pdf", "docx")
START_SECONDS = 900  # a bound on making the .venv and starting, not a timing: pip may find no cache
# The variables a run inside `make test` or an activated venv would otherwise pass to the clone's make.
NOT_PASSED = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")


def _readme_session() -> str:
    """The session README.md shows under its banner, from `export API=` to the line that ends it."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("export API=")
    return readme[start : readme.index("\n\nCtrl-C stops everything.", start)]


def _fresh_env(port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return {**env, "PORT": str(port), "BINDERY_MOTO_PORT": "0"}


def _clone(into: Path) -> str:
    """A clone of this checkout's HEAD in `into`; returns the commit."""
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", "--detach", head], check=True)
    return head


def _fonts_in(pdf_bytes: bytes) -> set[str]:
    """The base names of every font the PDF's pages use (their subset tags dropped)."""
    names = set()
    with pikepdf.open(io.BytesIO(pdf_bytes)) as pdf:
        for page in pdf.pages:
            for font in page.obj.get("/Resources", {}).get("/Font", {}).values():
                names.add(str(font.get("/BaseFont", "")).lstrip("/").split("+")[-1])
    return names


@pytest.mark.slow(170)
def test_make_run_on_a_fresh_clone_exports_every_format_and_stops_on_ctrl_c() -> None:
    with tempfile.TemporaryDirectory(prefix="bindery-fresh-clone-") as tmp:
        clone, work = Path(tmp) / "bindery", Path(tmp) / "session"
        work.mkdir()
        _clone(clone)
        assert not (clone / ".venv").exists()
        port = free_port()
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=clone,
            env=_fresh_env(port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        output = _Output(proc)
        try:
            deadline = time.monotonic() + START_SECONDS
            while not output.has("Ctrl-C stops everything."):
                assert proc.poll() is None and time.monotonic() < deadline, "\n".join(output.lines[-40:])
                time.sleep(0.2)
            assert (clone / ".venv" / "bin" / "python").exists()  # its own, made by `make run`
            banner = "\n".join(output.lines)
            printed = banner[banner.index("export API=") : banner.index("\n\nCtrl-C stops everything.")]
            exported, readme = printed.split("\n", 1)[0], _readme_session()
            assert exported.startswith(f"export API=http://127.0.0.1:{port} TOKEN=")
            # The README's session is the banner's, but for the address and token its first line carries.
            assert readme.split("\n", 1)[1] == printed.split("\n", 1)[1]
            session = exported + "\n" + readme.split("\n", 1)[1]
            for fmt in FORMATS:
                _export_with_the_readme_session(session, fmt, work)
            _a_pdf_of_every_script_is_set_in_the_wheels_fonts(port, exported)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=60)  # a teardown bound, not a timing
            output.join()
        # make itself dies of the SIGINT (-2) or reports its child's (2); the stack below it stopped cleanly.
        assert code in (0, 2, -signal.SIGINT), code
        lines = output.lines
        assert any(re.fullmatch(r"\d\d:\d\d:\d\d stopped in \d+\.\ds", line) for line in lines), lines[-20:]
        assert [line for line in lines if "Traceback" in line or "render_failed" in line] == []


class _Output:
    """The stack's output, line by line, read as it comes so that the process never blocks on a full pipe."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def join(self) -> None:
        self._thread.join(timeout=10)  # its last lines may still be in the pipe when the process is gone


def _export_with_the_readme_session(session: str, fmt: str, work: Path) -> None:
    """The README's session as printed, asking for `fmt` instead of html: ready, and downloaded."""
    asked = session.replace('"format": "html"', f'"format": "{fmt}"').replace("hello.html", f"hello.{fmt}")
    assert asked.count(f'"format": "{fmt}"') == 1 and asked.count(f"hello.{fmt}") == 2, asked
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", asked], cwd=work, capture_output=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    poll = next(line for line in ran.stdout.split(b"\n") if line.startswith(b'{"id"'))
    answer = json.loads(poll)
    assert (answer["format"], answer["state"], answer["complete"]) == (fmt, "ready", True), answer
    data = (work / f"hello.{fmt}").read_bytes()
    assert len(data) == answer["size_bytes"]
    if fmt == "markdown":
        assert data.decode().startswith("# Hello\n\nFirst words.")
    elif fmt == "html":
        assert b'<h1 id="hello">Hello</h1>' in data and b"<p>Last words.</p>" in data
    elif fmt == "epub":
        with zipfile.ZipFile(io.BytesIO(data)) as epub:
            assert epub.read("mimetype") == b"application/epub+zip"
    elif fmt == "docx":
        with zipfile.ZipFile(io.BytesIO(data)) as docx:
            body = docx.read("word/document.xml").decode()
        heading = '<w:pStyle w:val="Heading1"/></w:pPr><w:bookmarkStart w:id="1" w:name="hello"/><w:r>'
        assert heading + '<w:t xml:space="preserve">Hello</w:t>' in body  # (its bookmark: a link's target)
    else:
        with pikepdf.open(io.BytesIO(data)) as pdf:
            assert len(pdf.pages) >= 4  # a title page, an imprint, the contents and two chapters


def _a_pdf_of_every_script_is_set_in_the_wheels_fonts(port: int, exported: str) -> None:
    """A book in Arabic, Chinese, Japanese, Korean and emoji, made a pdf by the fresh stack: each is set in
    the font the wheels brought (Amiri, Noto Sans CJK, Noto Emoji), not in a fallback."""
    token = re.search(r"TOKEN=(\S+)", exported)
    assert token, exported
    api, headers = f"http://127.0.0.1:{port}", auth(token.group(1))
    manuscript = (
        "# العربية\n\nمرحبا بالعالم.\n\n# 中文 日本語 한국어\n\n"
        "敏捷的棕色狐狸。いろは。안녕하세요.\n\nBooks 📚 ★\n"
    )
    book = requests.post(
        f"{api}/books", headers=headers, json={"title": "Scripts", "manuscript": manuscript}, timeout=10
    ).json()["id"]
    export = requests.post(
        f"{api}/books/{book}/exports", headers=headers, json={"format": "pdf"}, timeout=10
    ).json()["id"]
    deadline = time.monotonic() + 120
    poll = f"{api}/books/{book}/exports/{export}"
    while (answer := requests.get(poll, headers=headers, timeout=10).json())["state"] == "pending":
        assert time.monotonic() < deadline, answer
        time.sleep(0.5)
    assert answer["state"] == "ready", answer
    fonts = _fonts_in(requests.get(answer["download_url"], timeout=30).content)
    for family in ("Amiri", "NotoSansCJK", "NotoEmoji"):
        assert any(name.startswith(family) for name in fonts), (family, fonts)
