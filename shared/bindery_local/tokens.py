"""The local stand-in for API Gateway's JWT authorizer: HS256 tokens signed with a secret of the stack's own.

The deployed stack verifies tokens of a real OIDC issuer (template.yaml's JwtIssuer and JwtAudience);
locally, `bindery token USER` mints one and the gateway verifies it the same way: signature, algorithm,
issuer, audience and expiry.

Each `make run` makes its secret at start (BINDERY_JWT_SECRET, when set, is the secret instead), so no
secret anyone else can read signs a token it accepts. It hands the secret to its owner in a file only they
can read, `secret_file(port)`, written once its port is bound and removed at its stop: that is where
`bindery token` finds it. Not an HTTP route: whoever can reach the stack could ask it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt

from bindery.limits import CLASS_CLAIM

ISSUER = "bindery-local"
AUDIENCE = "bindery"
ALGORITHM = "HS256"
SECRET_VARIABLE = "BINDERY_JWT_SECRET"
# RFC 7518 §3.2: an HS256 key is at least as long as its hash, 32 bytes (PyJWT warns below it).
MIN_SECRET_BYTES = 32
# Where `bindery token` looks for the stack when no --api or BINDERY_API names one: `make run`'s own port.
DEFAULT_API = "http://127.0.0.1:3000"
# A stack's secret file, by its port (`secret_file`).
SECRET_FILE = "local-stack-{port}.json"


class NoSecret(Exception):
    """No secret to sign with: BINDERY_JWT_SECRET is unset, and no stack runs at the API named."""


def _state_dir() -> Path:
    """$XDG_RUNTIME_DIR/bindery (the owner's own, emptied at logout), else ~/.cache/bindery."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "bindery" if runtime else Path.home() / ".cache" / "bindery"


def secret_file(port: int) -> Path:
    """The file in which the stack on 127.0.0.1:`port` keeps its secret for its owner while it runs."""
    return _state_dir() / SECRET_FILE.format(port=port)


def secret_for_this_run() -> str:
    """The secret this `make run` verifies tokens with: BINDERY_JWT_SECRET, or (unset or empty) one made
    now."""
    given = os.environ.get(SECRET_VARIABLE)
    if not given:
        return secrets.token_urlsafe(32)
    if len(given.encode()) < MIN_SECRET_BYTES:
        raise SystemExit(
            f"{SECRET_VARIABLE} holds {len(given.encode())} bytes: an HS256 secret takes {MIN_SECRET_BYTES} "
            "or more (or leave it unset, and the stack makes one for this run)"
        )
    return given


def _kept(path: Path) -> dict[str, Any] | None:
    """What a secret file holds, while the stack that wrote it runs: one ended by `kill -9` left its file."""
    try:
        kept: dict[str, Any] = json.loads(path.read_text())
        os.kill(int(kept["pid"]), 0)  # raises if no process of ours has that id now
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return kept


def keep_for_owner(port: int, api: str, key: str) -> Path:
    """Write the stack's secret where only this user can read it (mode 0600, in a folder of mode 0700), and
    remove what stacks that are gone left there.

    The file is made under another name with O_EXCL and O_NOFOLLOW, its mode set as it is created, and
    renamed into place: there is no moment at which it exists with a wider mode, and a file or link someone
    planted under either name is never written through."""
    path = secret_file(port)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = path.parent.stat()
    if folder.st_uid != os.getuid():
        raise SystemExit(
            f"{path.parent} belongs to another user: the stack keeps its secret only in a folder of yours"
        )
    if folder.st_mode & 0o077:
        path.parent.chmod(0o700)  # ours, made wider by someone else: no one but its owner lists it
    for left in path.parent.glob(SECRET_FILE.format(port="*")):
        if _kept(left) is None:
            left.unlink(missing_ok=True)
    aside = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"api": api, "secret": key, "pid": os.getpid()}, out)
    os.replace(aside, path)
    return path


def forget(port: int, key: str) -> None:
    """Remove the stack's secret file at its stop, if it still holds this run's secret."""
    path = secret_file(port)
    with contextlib.suppress(OSError, ValueError, KeyError):
        if json.loads(path.read_text())["secret"] == key:
            path.unlink()


def secret(api: str | None = None) -> str:
    """The secret a token for the local stack at `api` is signed with: BINDERY_JWT_SECRET when set (the
    stack then verifies with it too), else the one that stack keeps for its owner in `secret_file`.
    `api` defaults to BINDERY_API, then to `make run`'s own address."""
    given = os.environ.get(SECRET_VARIABLE)
    if given:
        return given
    url = api or os.environ.get("BINDERY_API") or DEFAULT_API
    port = urlsplit(url).port or 80
    path = secret_file(port)
    kept = _kept(path)
    if kept is None:
        raise NoSecret(
            f"no local stack runs at {url} (it keeps its secret in {path} while it runs): start `make run`, "
            f"name the stack with --api or BINDERY_API, or set {SECRET_VARIABLE} to the secret it was "
            "started with"
        )
    return str(kept["secret"])


def mint(
    user: str,
    ttl_seconds: int = 86_400,
    *,
    now: float | None = None,
    key: str | None = None,
    caller_class: str | None = None,
) -> str:
    """A token for `user`, signed with `key` or else `secret()`; with `caller_class`, the `bindery_class`
    claim that names the caller's class."""
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "sub": user,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    if caller_class is not None:
        claims[CLASS_CLAIM] = caller_class
    return jwt.encode(claims, key or secret(), algorithm=ALGORITHM)


class Rejected(Exception):
    """The token is absent, malformed, unsigned, wrongly signed, expired, or meant for someone else."""


def verify(authorization: str | None, key: str) -> dict[str, Any]:
    """The claims of a valid `Bearer` token signed with `key`, or Rejected. Only HS256 is accepted: never
    `none`."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Rejected("no bearer token")
    token = authorization[7:].strip()
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["sub", "exp", "iss", "aud"]},
        )
    except jwt.PyJWTError as exc:
        raise Rejected(str(exc)) from None
    return claims
