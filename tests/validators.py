"""The real validators: epubcheck, Ace by DAISY, qpdf, pdftotext and pdfimages. A missing one skips its
tests loudly on a developer's machine and fails the run under CI=true, where .ci/run has installed them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def _need(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        reason = f"{tool} is not installed (Debian package {package}; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def epubcheck(path: Path) -> str:
    """epubcheck's report. Debian installs it as an executable jar, so it is run through java."""
    tool = _need("epubcheck", "epubcheck")
    run = subprocess.run(["java", "-jar", tool, str(path)], capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


def qpdf_check(path: Path) -> subprocess.CompletedProcess[str]:
    tool = _need("qpdf", "qpdf")
    return subprocess.run([tool, "--check", str(path)], capture_output=True, text=True, timeout=300)


def pdftotext(path: Path, *extra: str) -> str:
    tool = _need("pdftotext", "poppler-utils")
    return subprocess.run([tool, *extra, str(path), "-"], capture_output=True, text=True, check=True).stdout


def pdfimages(path: Path) -> list[dict[str, str]]:
    """`pdfimages -list`: one row an image placed in the PDF (page, width, height, type, ...)."""
    tool = _need("pdfimages", "poppler-utils")
    lines = subprocess.run([tool, "-list", str(path)], capture_output=True, text=True, check=True).stdout
    header, _, *rows = lines.splitlines()
    names = header.split()
    return [dict(zip(names, row.split(), strict=False)) for row in rows]


ACE_DIR = Path(os.environ.get("BINDERY_ACE_DIR", Path(__file__).resolve().parents[1] / ".cache" / "ace"))


def ace(path: Path, out: Path) -> tuple[list[str], dict[str, object]]:
    """Ace by DAISY's verdict on an EPUB: each violation as "rule (impact): description", and the whole
    report. Ace runs its checks in Chromium; Debian's is used, so Puppeteer downloads none."""
    tool = ACE_DIR / "node_modules" / ".bin" / "ace-cli"
    browser = shutil.which("chromium")
    if not tool.exists() or browser is None:
        reason = (
            f"Ace by DAISY is not installed in {ACE_DIR} (make {ACE_DIR}/.installed), or chromium is missing"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    env = {**os.environ, "PUPPETEER_EXECUTABLE_PATH": browser}
    run = subprocess.run(
        [str(tool), "--silent", "--force", "--outdir", str(out), str(path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    report_path = out / "report.json"
    assert report_path.exists(), f"Ace wrote no report: {run.stdout[-1000:]} {run.stderr[-1000:]}"
    report = json.loads(report_path.read_text())
    violations = []
    for document in report["assertions"]:
        for check in document.get("assertions", []):
            if check["earl:result"]["earl:outcome"] != "pass":
                test = check["earl:test"]
                violations.append(
                    f"{test['dct:title']} ({test['earl:impact']}) in {document['earl:testSubject']['url']}: "
                    f"{check['earl:result'].get('dct:description', '')[:200]}"
                )
    return violations, report
