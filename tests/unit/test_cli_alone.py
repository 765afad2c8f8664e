"""The command line installs and runs without the server: bindery_cli imports nothing of Bindery's server
and no third-party package its own distribution (shared/cli/pyproject.toml) does not name."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.unit.test_layout import _imports

CLI = Path(__file__).resolve().parents[2] / "shared" / "cli"
# What a distribution's name is imported as.
IMPORTED_AS = {
    "pyyaml": "yaml",
    "urllib3": "urllib3",
    "tqdm": "tqdm",
    "standardwebhooks": "standardwebhooks",
    "markdown-it-py": "markdown_it",
    "mdit-py-plugins": "mdit_py_plugins",
}
SERVER = (
    "bindery",
    "bindery_local",
    "boto3",
    "botocore",
    "typst",
    "pikepdf",
    "moto",
    "aws_lambda_powertools",
)
SERVER += ("pynamodb", "imagesize")  # (markdown-it is the CLI's too: it finds a manuscript's images)


def test_bindery_cli_imports_only_the_standard_library_and_its_own_dependencies() -> None:
    declared = tomllib.loads((CLI / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("<")[0].split("=")[0].strip().lower() for d in declared}
    allowed = {IMPORTED_AS[n] for n in names} | {"bindery_cli"} | set(sys.stdlib_module_names)
    for path in sorted((CLI / "bindery_cli").glob("*.py")):
        for name in _imports(ast.parse(path.read_text())):
            assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_the_server_distribution_does_not_package_the_command_line_again() -> None:
    main = tomllib.loads((CLI.parents[1] / "pyproject.toml").read_text())
    include = main["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not [p for p in include if p.startswith("bindery_cli")] and "bindery_local" in include
    assert "scripts" not in main["project"]  # `bindery` is bindery-cli's alone


def test_the_command_line_runs_with_every_server_package_unimportable() -> None:
    """As in a venv with only bindery-cli: its help lists every client command, and a local-stack tool
    is refused in one line that says where it runs."""
    blocked = f"""
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER!r}:
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Absent())
import importlib.util
found = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: (
    None if name.split(".")[0] in {SERVER!r} else found(name, package)
)
from bindery_cli import cli
sys.exit(cli.main(sys.argv[1:]))
"""
    helped = subprocess.run([sys.executable, "-c", blocked, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    for command in ("books", "export", "exports", "batch", "webhooks", "events", "listen", "me"):
        assert f"    {command} " in helped.stdout
    assert "Exit status:" in helped.stdout and "  3  unreachable" in helped.stdout
    token = subprocess.run([sys.executable, "-c", blocked, "token", "me"], capture_output=True, text=True)
    assert token.returncode == 2 and token.stdout == ""
    assert token.stderr.startswith(
        "bindery: `bindery token` is the local stack's: run it from the repository"
    )
    assert "Traceback" not in token.stderr
    # A usage mistake is one line too, naming where the help is.
    wrong = subprocess.run(
        [sys.executable, "-c", blocked, "export", "B", "-f", "odt"], capture_output=True, text=True
    )
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert wrong.stderr.startswith("bindery export: argument --format/-f: invalid choice: 'odt'")
    assert wrong.stderr.endswith("(see bindery export -h)\n")


def test_no_module_of_the_command_line_is_over_500_lines() -> None:
    long = {
        p.name: n for p in (CLI / "bindery_cli").glob("*.py") if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}
