"""The local stand-in for API Gateway's JWT authorizer: HS256 tokens signed with a local secret.

The deployed stack verifies tokens of a real OIDC issuer (template.yaml's JwtIssuer and JwtAudience);
locally, `bindery token USER` mints one and the gateway verifies it the same way: signature, algorithm,
issuer, audience and expiry.
"""

from __future__ import annotations

import os
import time
from typing import Any

import jwt

from bindery.limits import CLASS_CLAIM

ISSUER = "bindery-local"
AUDIENCE = "bindery"
ALGORITHM = "HS256"
DEFAULT_SECRET = "bindery-local-development-secret-not-for-production"


def secret() -> str:
    return os.environ.get("BINDERY_JWT_SECRET") or DEFAULT_SECRET


def mint(
    user: str,
    ttl_seconds: int = 86_400,
    *,
    now: float | None = None,
    key: str | None = None,
    caller_class: str | None = None,
) -> str:
    """A token for `user`; with `caller_class`, the `bindery_class` claim that names the caller's class."""
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


def verify(authorization: str | None) -> dict[str, Any]:
    """The claims of a valid `Bearer` token, or Rejected. Only HS256 is accepted: never `none`."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Rejected("no bearer token")
    token = authorization[7:].strip()
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            secret(),
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["sub", "exp", "iss", "aud"]},
        )
    except jwt.PyJWTError as exc:
        raise Rejected(str(exc)) from None
    return claims
