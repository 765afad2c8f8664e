"""The real validators: epubcheck, qpdf and pdftotext. A missing one skips its tests loudly on a
developer's machine and fails the run under CI=true, where .ci/run has installed them."""

from __future__ import annotations

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
