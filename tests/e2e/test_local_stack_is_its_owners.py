"""The local stack is its owner's (issue 46, item 5): each `make run` verifies tokens with a secret of its
own, handed to its owner alone, and answers no request addressed to any name but its own loopback one,
which is what a web page that rebinds its own name to 127.0.0.1 cannot send."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator

import jwt
import pytest
import requests

from bindery_local import tokens
from bindery_local.stack import BUCKET, TABLE
from tests.e2e.stack import RunningStack, auth, start
from tests.servers import ROOT, free_port

# The secret that was in the source (bindery_local/tokens.py) until issue 46: anyone could sign with it.
PUBLISHED_SECRET = "bindery-local-development-secret-not-for-production"
REBOUND = "rebound.attacker.example"


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningStack]:
    """`make run` as a developer starts it: no BINDERY_JWT_SECRET."""
    running = start(free_port(), secret=None)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()


def _bindery_token(stack: RunningStack, user: str) -> str:
    """`bindery token USER` from another shell of the stack's owner: the banner's BINDERY_API, no secret."""
    env = {k: v for k, v in os.environ.items() if k != "BINDERY_JWT_SECRET"}
    made = subprocess.run(
        [str(ROOT / ".venv/bin/bindery"), "token", user],
        env={**env, "BINDERY_API": stack.api},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _me(api: str, token: str, **headers: str) -> requests.Response:
    return requests.get(f"{api}/me", headers={**auth(token), **headers}, timeout=10)


def test_a_token_forged_with_the_secret_once_in_the_source_is_refused(stack: RunningStack) -> None:
    now = int(time.time())
    claims = {"sub": "demo-user", "iss": tokens.ISSUER, "aud": tokens.AUDIENCE, "iat": now, "exp": now + 600}
    forged = jwt.encode(claims, PUBLISHED_SECRET, algorithm="HS256")

    assert _me(stack.api, forged).status_code == 401
    assert _me(stack.api, stack.token).json()["caller"] == "demo-user"


def test_the_banners_token_and_bindery_token_work_with_the_runs_own_secret(stack: RunningStack) -> None:
    assert _me(stack.api, stack.token).status_code == 200
    alice = _bindery_token(stack, "alice")
    answer = _me(stack.api, alice)
    assert answer.status_code == 200 and answer.json()["caller"] == "alice"

    # The hand-off: a file only the stack's owner can read, naming the stack it is the secret of.
    kept = tokens.secret_file(stack.port)
    mode = kept.stat().st_mode
    assert stat.S_IMODE(mode) == 0o600 and kept.stat().st_uid == os.getuid()
    assert stat.S_IMODE(kept.parent.stat().st_mode) & 0o077 == 0
    assert json.loads(kept.read_text())["api"] == stack.api


def test_a_request_addressed_to_a_rebound_name_is_refused_before_any_handler(stack: RunningStack) -> None:
    user = _bindery_token(stack, "rebound-victim")
    rebound = {"Host": f"{REBOUND}:{stack.port}"}

    # Given a valid token, as a page that rebinds its name cannot read one: refused all the same, before
    # the token is looked at, and so before any handler.
    made = requests.post(
        f"{stack.api}/books",
        headers={**auth(user), **rebound},
        json={"title": "Rebound", "manuscript": "# Rebound\n\nwritten through a rebound name\n"},
        timeout=10,
    )
    assert made.status_code == 421
    assert made.json()["error"]["code"] == "host_not_allowed"
    for path in ("/me", "/docs", "/docs/openapi.json", "/no-such-route"):
        refused = requests.get(f"{stack.api}{path}", headers=rebound, timeout=10)
        assert (refused.status_code, refused.json()["error"]["code"]) == (421, "host_not_allowed"), path
    # Another port on a loopback name is another server's name, not this stack's.
    assert _me(stack.api, user, Host=f"127.0.0.1:{stack.port + 1}").status_code == 421

    # Nothing was written: the caller has no book, and the table holds no trace of the title.
    assert requests.get(f"{stack.api}/books", headers=auth(user), timeout=10).json()["books"] == []
    items = stack.client("dynamodb").scan(TableName=TABLE)["Items"]
    assert "written through a rebound name" not in json.dumps(items)
    # The stack's own names are answered.
    for host in (f"127.0.0.1:{stack.port}", f"localhost:{stack.port}", f"LocalHost:{stack.port}"):
        assert _me(stack.api, user, Host=host).status_code == 200, host


def test_the_embedded_aws_refuses_a_rebound_name_too(stack: RunningStack) -> None:
    port = stack.aws.rsplit(":", 1)[1]
    list_tables = {
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host;x-amz-target, Signature=00",
    }

    rebound = requests.post(
        stack.aws, headers={**list_tables, "Host": f"{REBOUND}:{port}"}, data="{}", timeout=10
    )
    assert rebound.status_code == 421 and TABLE not in rebound.text
    assert rebound.json()["error"]["code"] == "host_not_allowed"
    own = requests.post(stack.aws, headers=list_tables, data="{}", timeout=10)
    assert own.status_code == 200 and TABLE in own.json()["TableNames"]


def test_a_cross_site_form_cannot_write_to_the_embedded_aws_or_the_api(stack: RunningStack) -> None:
    """What an HTML form on another site sends to 127.0.0.1 itself, with the right Host: no Authorization
    (a form cannot set one), its page's Origin, and Sec-Fetch-Site: cross-site from a current browser."""
    s3 = stack.client("s3")
    form: dict[str, tuple[str | None, bytes]] = {
        "key": (None, b"planted-by-a-form"),
        "file": ("x.txt", b"planted"),
    }
    for other in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
        planted = requests.post(f"{stack.aws}/{BUCKET}", files=form, headers=other, timeout=10)
        assert planted.status_code == 403, (other, planted.status_code, planted.text)
        assert planted.json()["error"]["code"] == "origin_not_allowed"
        made = requests.post(
            f"{stack.api}/books",
            headers={**auth(stack.token), **other},
            json={"title": "Cross-site", "manuscript": "# Cross-site\n\nposted by another site's page\n"},
            timeout=10,
        )
        assert (made.status_code, made.json()["error"]["code"]) == (403, "origin_not_allowed"), other
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="planted")
    assert listed.get("KeyCount", 0) == 0
    books = requests.get(f"{stack.api}/books", headers=auth(stack.token), timeout=10).json()["books"]
    assert "Cross-site" not in [book["title"] for book in books]

    # The stack's own callers: a presigned upload and download as curl or the CLI make them (no Origin),
    # and the API's own page.
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "own/upload"}, ExpiresIn=60
    )
    assert requests.put(url, data=b"own bytes", timeout=10).status_code == 200
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "own/upload"}, ExpiresIn=60
    )
    assert requests.get(url, timeout=10).content == b"own bytes"
    own_page = {"Origin": stack.api, "Sec-Fetch-Site": "same-origin"}
    assert _me(stack.api, stack.token, **own_page).status_code == 200


@pytest.mark.slow(8)
def test_each_run_makes_a_secret_of_its_own_and_takes_its_file_away_at_its_stop(stack: RunningStack) -> None:
    second = start(free_port(), secret=None)
    try:
        assert _me(second.api, stack.token).status_code == 401
        assert _me(second.api, second.token).status_code == 200
        kept = tokens.secret_file(second.port)
        assert kept.exists() and kept != tokens.secret_file(stack.port)
    finally:
        second.stop()
    assert not kept.exists()
    assert tokens.secret_file(stack.port).exists()  # the other run's is its own
