"""The locks hold what pyproject.toml asks for, and Lambda runs what the tests ran.

`make lock` writes three files from pyproject.toml and shared/cli/pyproject.toml: requirements/dev.lock (the
venv), shared/requirements.txt (the layer, for the template's runtime and architecture) and
requirements/sam.lock (the SAM CLI). Each package in them is pinned to one version with its hashes, and
`make`, the layer's build and CI install from them and nothing else. A test here that fails after an edit of
a pyproject.toml means: run `make lock`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.infra import template
from tests.servers import ROOT

DEV_LOCK = ROOT / "requirements" / "dev.lock"
LAYER_LOCK = ROOT / "shared" / "requirements.txt"
SAM_LOCK = ROOT / "requirements" / "sam.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CLI_PYPROJECT = tomllib.loads((ROOT / "shared" / "cli" / "pyproject.toml").read_text())
# The AWS SDK's parts, released together: a boto3 meeting another release's botocore fails at the call.
SDK = ("boto3", "botocore", "s3transfer", "jmespath")


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: frozenset[str]
    via: tuple[str, ...]  # uv's annotation: what asked for it


def read_lock(path: Path) -> list[Pin]:
    """The pins of a lock as uv writes it: `name==version ; marker \\`, its `--hash=` lines, then `# via`."""
    entries: list[tuple[Requirement, list[str], list[str]]] = []
    for line in path.read_text().splitlines():
        text = line.strip().rstrip("\\").strip()
        if not text:
            continue
        if not line[0].isspace() and not text.startswith("#"):
            entries.append((Requirement(text), [], []))
        elif text.startswith("--hash="):
            entries[-1][1].append(text.removeprefix("--hash="))
        elif entries and text.startswith("#"):
            entries[-1][2].append(re.sub(r"^#\s*(via\b)?\s*", "", text))
    pins = []
    for requirement, hashes, via in entries:
        (spec,) = requirement.specifier  # one `==`, or the unpacking fails
        assert spec.operator == "==", f"{path.name}: {requirement} is not pinned"
        pins.append(
            Pin(
                name=canonicalize_name(requirement.name),
                version=Version(spec.version),
                marker=requirement.marker,
                hashes=frozenset(hashes),
                via=tuple(v for v in via if v),
            )
        )
    return pins


def versions(pins: list[Pin]) -> dict[str, set[Version]]:
    held: dict[str, set[Version]] = {}
    for pin in pins:
        held.setdefault(pin.name, set()).add(pin.version)
    return held


def unmet(asked: list[str], pins: list[Pin], environment: dict[str, str] | None = None) -> list[str]:
    """Each requirement of `asked` that no pin meets: absent from the lock, or locked outside its range."""
    held = versions(pins)
    missing = []
    for line in asked:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        locked = held.get(canonicalize_name(requirement.name), set())
        if not any(requirement.specifier.contains(v, prereleases=True) for v in locked):
            missing.append(f"{line} (locked: {', '.join(map(str, sorted(locked))) or 'nothing'})")
    return missing


def requirements_in(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


RUNTIME = PYPROJECT["project"]["dependencies"]
VENV_ASKS = (
    RUNTIME
    + PYPROJECT["project"]["optional-dependencies"]["dev"]
    + CLI_PYPROJECT["project"]["dependencies"]
    + PYPROJECT["build-system"]["requires"]
    + CLI_PYPROJECT["build-system"]["requires"]
    + requirements_in(ROOT / "requirements" / "build.in")
)


def _layer_environment() -> dict[str, str]:
    """Marker values on the Lambda runtime template.yaml's Globals name (python3.12 on arm64, Linux)."""
    function = template()["Globals"]["Function"]
    version = function["Runtime"].removeprefix("python")
    machine = {"arm64": "aarch64", "x86_64": "x86_64"}[function["Architectures"][0]]
    return {
        "python_version": version,
        "python_full_version": f"{version}.0",
        "platform_machine": machine,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }


@pytest.mark.parametrize("lock", [DEV_LOCK, LAYER_LOCK, SAM_LOCK], ids=lambda p: p.name)
def test_every_locked_package_is_one_version_with_its_sha256_hashes(lock: Path) -> None:
    pins = read_lock(lock)  # refuses a line that is not `==`
    assert pins
    unhashed = [p.name for p in pins if not p.hashes or not all(h.startswith("sha256:") for h in p.hashes)]
    assert not unhashed, f"{lock.name}: no sha256 hashes for {unhashed}: run `make lock`"


def test_the_venv_lock_meets_every_requirement_of_both_pyproject_files() -> None:
    """Runtime, dev and the CLI's dependencies, and the build backend make installs them with."""
    missing = unmet(VENV_ASKS, read_lock(DEV_LOCK))
    assert not missing, f"requirements/dev.lock does not meet {missing}: run `make lock`"


def test_the_layer_lock_meets_every_runtime_requirement_on_the_templates_runtime() -> None:
    missing = unmet(RUNTIME, read_lock(LAYER_LOCK), _layer_environment())
    assert not missing, f"shared/requirements.txt does not meet {missing}: run `make lock`"


def test_a_dependency_dropped_from_pyproject_leaves_the_locks() -> None:
    """A pin that names a pyproject.toml (or requirements/*.in) as its reason is still asked for there."""
    asked = {
        "bindery (pyproject.toml)": RUNTIME + PYPROJECT["project"]["optional-dependencies"]["dev"],
        "bindery-cli (shared/cli/pyproject.toml)": CLI_PYPROJECT["project"]["dependencies"],
        "-r requirements/build.in": requirements_in(ROOT / "requirements" / "build.in"),
        "-r requirements/sam.in": requirements_in(ROOT / "requirements" / "sam.in"),
    }
    names = {source: {canonicalize_name(Requirement(r).name) for r in rs} for source, rs in asked.items()}
    stale = [
        f"{lock.name}: {pin.name} (via {source})"
        for lock in (DEV_LOCK, LAYER_LOCK, SAM_LOCK)
        for pin in read_lock(lock)
        for source in pin.via
        if source in names and pin.name not in names[source]
    ]
    assert not stale, f"locked for a requirement no longer asked: {stale}: run `make lock`"


def test_the_layer_ships_the_versions_the_tests_ran() -> None:
    """Every package of the layer is in the venv's lock at the same version, with the same files' hashes."""
    venv = {(p.name, p.version): p.hashes for p in read_lock(DEV_LOCK)}
    differing = [
        f"{p.name}=={p.version}" for p in read_lock(LAYER_LOCK) if venv.get((p.name, p.version)) != p.hashes
    ]
    assert not differing, f"the layer's {differing} differ from requirements/dev.lock: run `make lock`"


def test_the_layer_ships_boto3_with_the_botocore_it_was_released_with() -> None:
    """The layer, not the runtime, brings boto3, so it meets only the botocore, s3transfer and jmespath
    pinned beside it: each within what that boto3 release requires."""
    layer = {p.name: p.version for p in read_lock(LAYER_LOCK)}
    assert set(SDK) <= set(layer), f"the layer's lock lacks {sorted(set(SDK) - set(layer))}"
    # The venv installed this boto3 from its lock, and the layer's is the same release (the test above).
    assert Version(metadata.version("boto3")) == layer["boto3"], "the venv is not its lock's: run `make`"
    boto3_needs = [Requirement(r) for r in metadata.requires("boto3") or [] if "extra ==" not in r]
    assert {canonicalize_name(r.name) for r in boto3_needs} == set(SDK) - {"boto3"}
    outside = [str(r) for r in boto3_needs if layer[canonicalize_name(r.name)] not in r.specifier]
    assert not outside, f"boto3=={layer['boto3']} needs {outside}; the layer pins {layer}"


def test_the_layer_lock_is_resolved_for_the_runtime_and_architecture_the_template_names() -> None:
    """uv's header records how the lock was resolved; the layer's build (shared/Makefile) asks the same."""
    env = _layer_environment()
    command = LAYER_LOCK.read_text().splitlines()[1]
    assert f"--python-version {env['python_version']} " in command, command
    assert re.search(rf"--python-platform {env['platform_machine']}-manylinux", command), command
    build = (ROOT / "shared" / "Makefile").read_text()
    assert f"--python-version {env['python_version']} " in build
    assert f"_{env['platform_machine']}" in build and "--require-hashes" in build
