"""2. The layer, unzipped: its size against Lambda's limit, and what it is made of.

As `sam build` makes it (shared/Makefile, arm64 wheels).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.bench.aws import ROOT
from tests.bench.report import record, say


def measure() -> None:
    """The layer as `sam build` makes it (shared/Makefile, arm64 wheels), unzipped: what every function's
    cold start pulls from S3 and unpacks. Needs python3.12 (pyenv's, here) and the package index."""
    say("\n2. The layer, unzipped (shared/Makefile, as sam build runs it)")
    env = {**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", "3.11.7:3.12.1")}
    with tempfile.TemporaryDirectory() as out:
        made = subprocess.run(
            ["make", "--no-print-directory", "-C", "shared", "build-BinderyLayer", f"ARTIFACTS_DIR={out}"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode:
            record("layer", "unzipped size (could not build it)", made.stderr.strip()[-60:])
            return
        python = Path(out) / "python"
        sizes: dict[str, int] = {}
        for path in python.rglob("*"):
            if path.is_file():
                top = path.relative_to(python).parts[0].split("-")[0].removesuffix(".libs")
                sizes[top] = sizes.get(top, 0) + path.stat().st_size
    total = sum(sizes.values())
    record(
        "layer",
        "the layer, unzipped",
        f"{total / 2**20:.1f} MiB",
        "< 250 MiB (Lambda's limit)",
        total < 250 * 2**20,
    )
    record("layer", "of which bindery", f"{sizes.get('bindery', 0) / 2**20:.1f} MiB")
    from bindery.engine.typefaces import FONT_PACKAGES

    fonts = [package for package, _, _ in FONT_PACKAGES]
    font_bytes = sum(sizes.get(package, 0) for package in fonts)
    record("layer", f"of which the PDF's fonts ({', '.join(fonts)})", f"{font_bytes / 2**20:.1f} MiB")
    shipped_dev = sorted(name for name in sizes if name.startswith("bindery_local"))
    record("layer", "development code shipped (bindery_local)", str(len(shipped_dev)), "0", not shipped_dev)
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    record("layer", "the largest parts", ", ".join(f"{k} {v / 2**20:.1f}" for k, v in largest) + " MiB")
