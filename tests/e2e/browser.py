"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: enough to load a page, run
script in it, record every request it makes, and take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import websocket

FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-default-apps", "--disable-sync", "--no-first-run",
    "--disable-extensions", "--mute-audio", "--window-size=1280,1400", "--remote-debugging-port=0",
]  # fmt: skip


class Page:
    def __init__(self, ws: websocket.WebSocket):
        self.ws, self.ids = ws, itertools.count(1)
        self.requests: list[str] = []  # every URL the page asked for

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        call = next(self.ids)
        self.ws.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])
            if message.get("id") == call:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def type(self, selector: str, text: str) -> None:
        """Focus the element and type into it, as a keyboard would."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus() || true")
        self.send("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click() || true")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.25)
        return value

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))


@contextmanager
def chromium() -> Iterator[Page]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        reason = "headless Chromium is not installed (Debian: apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: its helpers go with it
        )
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (active.exists() and active.read_text().strip()):
                assert proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
                time.sleep(0.05)
            port = active.read_text().split()[0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
                [target] = [t for t in json.load(answer) if t["type"] == "page"]
            ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
            try:
                page = Page(ws)
                page.send("Network.enable")
                page.send("Page.enable")
                yield page
            finally:
                ws.close()
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop Chromium and every helper process it started. Its renderer and utility processes outlive the
    browser process by a moment, still writing to the profile, and the profile's removal then failed
    ("Directory not empty") on a busy machine: so the whole group goes, and is gone, before that."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (a zombie waiting for init is not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
