"""Schemathesis against the API's OpenAPI document on the local stack: no server error, no answer outside
the document, over at least 1,000 generated cases, negative ones (each value outside its schema: ids off
their pattern, numbers out of range, bodies of the wrong shape) as well as positive ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.e2e.stack import RunningStack, promises_broken
from tests.figures import record
from tests.servers import ROOT

CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance"
# Examples per operation: 50 in `make test` (over 1,000 cases in all), 100 in `make reliability`.
EXAMPLES = os.environ.get("BINDERY_SCHEMATHESIS_EXAMPLES", "50")


@pytest.mark.slow(60)
def test_generated_requests_find_no_server_error_and_no_schema_violation(stack: RunningStack) -> None:
    tool = shutil.which("schemathesis") or str(ROOT / ".venv" / "bin" / "schemathesis")
    if not os.path.exists(tool):
        pytest.fail("schemathesis is not installed (it is in the dev extra)")
    run = subprocess.run(
        [tool, "run", str(ROOT / "docs" / "openapi.json"), "--url", stack.api,
         "-H", f"Authorization: Bearer {stack.token}", "-n", EXAMPLES, "--checks", CHECKS, "--mode", "all",
         "--seed", "20261129"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    found = re.search(r"(\d+) generated", run.stdout)
    assert found is not None, run.stdout[-3000:]
    generated = int(found.group(1))
    failures = re.search(r"(\d+) failures?", run.stdout.split("SUMMARY")[-1])
    record("schemathesis: generated cases", generated)
    record("schemathesis: server errors and schema violations", int(failures.group(1)) if failures else 0)
    # And whatever the generated requests made, the promises hold once its builds have ended.
    broken = promises_broken(stack)
    record("schemathesis: promises broken once its builds ended", len(broken))
    assert run.returncode == 0, run.stdout[-4000:]
    assert generated >= 1000
    assert broken == []
