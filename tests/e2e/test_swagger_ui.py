"""Swagger UI at /docs on the local stack, in headless Chromium: it loads from localhost alone, and one
request run from the page with a token comes back in the page."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import requests

from tests.e2e.browser import chromium
from tests.e2e.stack import RunningStack, auth
from tests.servers import ROOT

# Every operation of the document the page loads: each is one block on the page.
OPERATIONS = sum(
    method in ("get", "post", "put", "patch", "delete")
    for path in json.loads((ROOT / "docs/openapi.json").read_text())["paths"].values()
    for method in path
)


def test_swagger_ui_runs_a_request_with_a_token_from_localhost_alone(
    stack: RunningStack, tmp_path: Path
) -> None:
    title = "Swagger's Lighthouse"
    book = requests.post(
        f"{stack.api}/books",
        headers=auth(stack.token),
        json={"title": title, "manuscript": "# One\n\nx\n"},
        timeout=10,
    ).json()["id"]

    with chromium() as page:
        page.send("Page.navigate", url=f"{stack.api}/docs")
        page.wait_for(f"document.querySelectorAll('.opblock').length === {OPERATIONS}")

        page.click(".auth-wrapper .authorize")
        page.wait_for("document.querySelector('.auth-container input') !== null")
        page.type(".auth-container input", stack.token)
        page.click(".auth-btn-wrapper .modal-btn.authorize")
        page.wait_for("document.querySelector('.auth-btn-wrapper .modal-btn.btn-done') !== null")
        page.click(".auth-btn-wrapper .modal-btn.btn-done")

        operation = "#operations-default-getBook"
        page.click(f"{operation} .opblock-summary-control")
        page.wait_for(f"document.querySelector('{operation} .try-out__btn') !== null")
        page.click(f"{operation} .try-out__btn")
        page.wait_for(f"document.querySelector('{operation} input[placeholder=bookId]') !== null")
        page.type(f"{operation} input[placeholder=bookId]", book)
        # The page takes typed input after a debounce: until then Execute says the field is empty, and is
        # pressed again.
        answered = f"{operation} .live-responses-table .response .response-col_status"
        status = page.wait_for(
            f"""(() => {{
              const status = document.querySelector('{answered}');
              if (status) return status.innerText;
              document.querySelector('{operation} .execute').click();
              return null;
            }})()""",
        )
        shown = page.evaluate(
            f"document.querySelector('{operation} .live-responses-table .microlight').innerText"
        )
        page.evaluate(f"document.querySelector('{operation}').scrollIntoView()")
        shot = tmp_path / "swagger-ui.png"
        page.screenshot(shot)

    assert status.strip() == "200"
    assert json.loads(shown)["title"] == title and json.loads(shown)["id"] == book
    assert any(url.endswith(f"/books/{book}") for url in page.requests)  # the page itself made the call
    fetched = [
        url for url in page.requests if not url.startswith("data:")
    ]  # data: URLs are inline, not fetched
    assert fetched and all(url.startswith(stack.api + "/") for url in fetched), fetched
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    if os.environ.get("BINDERY_WRITE_SAMPLES"):
        shutil.copy(shot, ROOT / "docs" / "samples" / "swagger-ui.png")
