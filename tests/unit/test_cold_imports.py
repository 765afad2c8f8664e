"""What a cold handler imports. A poll of a ready export needs the format's extension and content type, which
the format table holds: it must not load a renderer, or markdown-it, to learn them (it used to load the
html renderer and 68 modules of markdown-it on every cold poll)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from bindery import wiring
from bindery.config import Settings
from bindery.engine import FORMATS
from bindery.objects import Objects
from bindery.storage import Store
from bindery_local.aws import EmbeddedAws
from bindery_local.template import create_table
from tests.events import http_event
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]

POLL = """
import json, sys
from bindery_local.context import LambdaContext
from functions.poll import app

context = LambdaContext("poll", timeout_ms=30_000)
answers = [app.handler(event, context) for event in json.load(open(sys.argv[1]))]
heavy = ("bindery.engine.", "bindery.bundles", "markdown_it", "typst", "pikepdf")
# The cut's own helpers, which the API's book routes import with it: pure Python, no markdown-it.
light = (
    "bindery.engine.anchors",
    "bindery.engine.comments",
    "bindery.engine.crossrefs",
    "bindery.engine.spans",
    "bindery.engine.divs",  # (a div's id is a line the cut reads: `re`, spans and headings alone)
    "bindery.engine.headings",
    "bindery.engine.pandoc_tables",  # (its bound on a table's lines; `re` and grid_tables alone)
    "bindery.engine.grid_tables",
)
loaded = [m for m in sys.modules if m.startswith(heavy) and m not in light]
print(json.dumps({"answers": answers, "loaded": sorted(loaded)}))
"""


@pytest.fixture
def aws() -> Iterator[str]:
    server = EmbeddedAws(free_port())
    server.start()
    try:
        yield server.endpoint
    finally:
        server.stop()


def test_a_cold_poll_of_each_format_imports_no_renderer(
    aws: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws)
    create_table(boto3.client("dynamodb"), "cold")
    boto3.client("s3").create_bucket(Bucket="cold")
    settings = Settings(table="cold", bucket="cold")
    store, objects = Store(settings), Objects(settings)
    api, builds = wiring.api(settings, store, objects), wiring.build_worker(settings, store, objects)
    book, _, _ = api.books.create_book("user-alice", "Cold", "# One\n\ntext\n")
    events = []
    for fmt in FORMATS:
        export_id = api.exports.submit("user-alice", book.id, fmt, None)[0]["id"]
        assert builds.build(book.id, export_id) == "ready"
        events.append(http_event("GET", f"/books/{book.id}/exports/{export_id}"))
    (tmp_path / "events.json").write_text(json.dumps(events))

    env = {**os.environ, "BINDERY_TABLE": "cold", "BINDERY_BUCKET": "cold", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", POLL, str(tmp_path / "events.json")],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])

    bodies = [json.loads(answer["body"]) for answer in found["answers"]]
    assert [(b["format"], b["state"], bool(b["download_url"])) for b in bodies] == [
        (fmt, "ready", True) for fmt in FORMATS
    ]
    assert found["loaded"] == []


WIRED = """
import importlib, json, sys
from bindery import wiring

importlib.import_module(f"functions.{sys.argv[1]}.app")
getattr(wiring, sys.argv[2])()  # builds the handler's services on its first invoke; makes no AWS call
print(json.dumps(sorted(m for m in sys.modules if m.startswith("bindery"))))
"""
# What each handler's services never call, and so must not load: the API's services and routes for the
# worker and the schedules; anything of exports, books or builds for the webhook functions.
NOT_THE_WEBHOOKS = {"bindery.api", "bindery.exports", "bindery.batches", "bindery.library", "bindery.builds"}


@pytest.mark.parametrize(
    ("handler", "wire", "needs", "never"),
    [
        ("webhook_ingest", "default_webhooks", "deliveries", NOT_THE_WEBHOOKS | {"bindery.engine"}),
        ("webhook_sender", "default_webhooks", "deliveries", NOT_THE_WEBHOOKS | {"bindery.engine"}),
        ("webhook_sweep", "default_webhooks", "deliveries", NOT_THE_WEBHOOKS | {"bindery.engine"}),
        (
            "build_worker",
            "default_build_worker",
            "builds",
            {"bindery.api", "bindery.exports", "bindery.library"},
        ),
        ("expiry_gc", "default_expiry_gc", "schedules", {"bindery.api", "bindery.exports", "bindery.builds"}),
        (
            "stale_sweep",
            "default_stale_sweep",
            "batches",
            {"bindery.api", "bindery.builds", "bindery.deliveries"},
        ),
        ("poll", "default_api", "api.http", {"bindery.builds", "bindery.schedules", "bindery.deliveries"}),
    ],
)
def test_a_handler_and_its_wiring_load_no_other_handler_s_services(
    handler: str, wire: str, needs: str, never: set[str]
) -> None:
    env = {
        **os.environ,
        "BINDERY_TABLE": "cold",
        "BINDERY_BUCKET": "cold",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "-c", WIRED, handler, wire],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert f"bindery.{needs}" in loaded  # its own services were built
    assert sorted(loaded & never) == []


FIRST_RENDERER = """
import gc, json
from bindery import engine
before = gc.get_threshold()
engine.renderer_for("html")
print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count() > 0, engine.FULL_PASS_EVERY]))
"""


def test_a_worker_s_first_renderer_freezes_what_it_imported_and_spaces_out_the_full_collections() -> None:
    """After the freeze, little is left for a full pass to walk, so Python ran one every tenth pass of the
    middle generation (90 in an epub of 50 MB, a sixth of its time): the worker waits a hundred times longer,
    and collects the young generations as before."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")])}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_RENDERER],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    before, after, frozen, every = json.loads(out.stdout.strip().splitlines()[-1])
    assert frozen
    assert after == [before[0], before[1], every] and every == 1000


HIGHLIGHTED = """
import io, json, sys
from bindery.engine import Source, Text, renderer_for
loaded = []
for body in sys.argv[1:]:
    for fmt in ("html", "epub", "docx"):
        source = Source("abcdef0123456789abcd", "Work", 1, ("T",))
        renderer_for(fmt).render(source, [Text(1, "T", "# T\\n\\n" + body)], io.BytesIO())
    loaded.append(sorted(m for m in sys.modules if m.split(".")[0] == "pygments"))
print(json.dumps(loaded))
"""


def test_a_build_imports_pygments_only_once_a_chapter_holds_code_in_a_language_it_highlights() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")])}
    bodies = [
        "```\nx = 1\n```\n\n    x = 1\n\n`x = 1`\n",
        "```nosuchlang\nx = 1\n```\n",
        "```python\nx = 1\n```\n",
    ]
    out = subprocess.run(
        [sys.executable, "-c", HIGHLIGHTED, *bodies],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    unnamed, unknown, named = json.loads(out.stdout.strip().splitlines()[-1])
    assert unnamed == [] and unknown == []  # (a name is looked up in highlighting.LANGUAGES first)
    assert "pygments.lexers.python" in named
