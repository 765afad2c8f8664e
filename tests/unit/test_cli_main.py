"""`bindery` end to end in-process (cli.main) against a scripted server on 127.0.0.1: where its options
go, what it checks before sending anything, and the one line each error is."""

from __future__ import annotations

import json

import pytest

from bindery_cli import cli
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
