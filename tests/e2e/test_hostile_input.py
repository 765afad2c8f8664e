"""Hostile requests through the local stack's HTTP API: each gets its documented 4xx and writes nothing.
The table and the bucket are compared before and after the whole barrage."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import boto3
import jwt
import pytest
import requests

from bindery_local import tokens
from tests.e2e.stack import RunningStack, auth, promises_broken
from tests.figures import record

BOOK = "{book}"
EXPORT = "{export}"


def _none_token(user: str) -> str:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    claims = {"sub": user, "iss": tokens.ISSUER, "aud": tokens.AUDIENCE, "exp": int(time.time()) + 600}
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=")
    return f"{header.decode()}.{body.decode()}."


def _foreign_token(**changes: Any) -> str:
    claims = {
        "sub": "demo-user",
        "iss": tokens.ISSUER,
        "aud": tokens.AUDIENCE,
        "exp": int(time.time()) + 600,
        **changes,
    }
    return jwt.encode(claims, tokens.secret(), algorithm="HS256")


SVG_ASSET = '{"name": "a.svg", "content_type": "image/svg+xml", "size": 10}'


def _cases() -> list[tuple[str, str, str, dict[str, str], Any, int, str | None]]:
    """(name, method, path, extra headers, body (str, bytes or None), status, error code or None)."""
    exp = f"/books/{BOOK}/exports"
    one = f"/books/{BOOK}/exports/{EXPORT}"
    cases: list[tuple[str, str, str, dict[str, str], Any, int, str | None]] = [
        # tokens: API Gateway's own 401, before any handler runs
        ("no token", "GET", one, {"Authorization": ""}, None, 401, None),
        ("bearer with no token", "GET", one, {"Authorization": "Bearer"}, None, 401, None),
        ("garbage token", "GET", one, {"Authorization": "Bearer not.a.jwt"}, None, 401, None),
        ("basic auth", "GET", one, {"Authorization": "Basic ZGVtbzpkZW1v"}, None, 401, None),
        (
            "expired token",
            "GET",
            one,
            {"Authorization": "Bearer " + tokens.mint("demo-user", 60, now=1e9)},
            None,
            401,
            None,
        ),
        (
            "alg none token",
            "GET",
            one,
            {"Authorization": "Bearer " + _none_token("demo-user")},
            None,
            401,
            None,
        ),
        (
            "token signed with the wrong key",
            "GET",
            one,
            {"Authorization": "Bearer " + tokens.mint("demo-user", key="another-secret-" + "x" * 32)},
            None,
            401,
            None,
        ),
        (
            "token for another audience",
            "GET",
            one,
            {"Authorization": "Bearer " + _foreign_token(aud="other")},
            None,
            401,
            None,
        ),
        (
            "token from another issuer",
            "GET",
            one,
            {"Authorization": "Bearer " + _foreign_token(iss="https://evil")},
            None,
            401,
            None,
        ),
        (
            "token with no subject",
            "GET",
            one,
            {"Authorization": "Bearer " + _foreign_token(sub=None)},
            None,
            401,
            None,
        ),
        # bodies
        ("truncated json", "POST", exp, {}, '{"format": "html"', 400, "invalid_json"),
        ("malformed json", "POST", exp, {}, "{", 400, "invalid_json"),
        ("json array", "POST", exp, {}, "[]", 400, "invalid_json"),
        ("json string", "POST", exp, {}, '"html"', 400, "invalid_json"),
        ("json null", "POST", exp, {}, "null", 400, "invalid_json"),
        ("not utf-8", "POST", exp, {}, b"\xff\xfe\x00{", 400, "invalid_json"),
        ("empty object", "POST", exp, {}, "{}", 400, "missing_field"),
        ("format a number", "POST", exp, {}, '{"format": 1}', 400, "invalid_format"),
        ("format a list", "POST", exp, {}, '{"format": ["html"]}', 400, "invalid_format"),
        ("extra field", "POST", exp, {}, '{"format": "html", "extra": 1}', 400, "unknown_field"),
        ("forged owner", "POST", exp, {}, '{"format": "html", "owner": "mallory"}', 400, "unknown_field"),
        ("unknown format", "POST", exp, {}, '{"format": "odt"}', 422, "unknown_format"),
        ("empty format", "POST", exp, {}, '{"format": ""}', 422, "unknown_format"),
        (
            "1 MB export request",
            "POST",
            exp,
            {},
            '{"format": "' + "x" * 1_000_000 + '"}',
            413,
            "body_too_large",
        ),
        ("10 MB body", "POST", exp, {}, "x" * (10 * 1024 * 1024 + 1), 413, None),
        (
            "10 KB idempotency key",
            "POST",
            exp,
            {"Idempotency-Key": "k" * 10_240},
            '{"format": "html"}',
            400,
            "invalid_idempotency_key",
        ),
        (
            "control character in key",
            "POST",
            exp,
            {"Idempotency-Key": "bad\x07key"},
            '{"format": "html"}',
            400,
            "invalid_idempotency_key",
        ),
        (
            "forged owner on a book",
            "POST",
            "/books",
            {},
            '{"title": "t", "manuscript": "# a", "owner": "x"}',
            400,
            "unknown_field",
        ),
        ("title a number", "POST", "/books", {}, '{"title": 5, "manuscript": "# a"}', 400, "invalid_field"),
        (
            "title too long",
            "POST",
            "/books",
            {},
            json.dumps({"title": "t" * 501, "manuscript": "# a"}),
            400,
            "invalid_title",
        ),
        (
            "6 MB manuscript",
            "POST",
            "/books",
            {},
            json.dumps({"title": "t", "manuscript": "x" * 6_000_000}),
            413,
            None,
        ),
        (
            "if-match garbage",
            "PUT",
            f"/books/{BOOK}/manuscript",
            {"If-Match": "yesterday"},
            '{"manuscript": "# b"}',
            400,
            "invalid_if_match",
        ),
        (
            "stale if-match",
            "PUT",
            f"/books/{BOOK}/manuscript",
            {"If-Match": '"99"'},
            '{"manuscript": "# b"}',
            412,
            "revision_mismatch",
        ),
        (
            "upload id traversal",
            "PUT",
            f"/books/{BOOK}/manuscript",
            {},
            '{"upload_id": "../../etc/passwd"}',
            400,
            "invalid_upload_id",
        ),
        (
            "both manuscript and upload",
            "PUT",
            f"/books/{BOOK}/manuscript",
            {},
            '{"manuscript": "# a", "upload_id": "abcdefgh"}',
            400,
            "missing_field",
        ),
        # pages
        ("zero page size", "GET", exp + "?limit=0", {}, None, 400, "invalid_limit"),
        ("negative page size", "GET", exp + "?limit=-5", {}, None, 400, "invalid_limit"),
        ("huge page size", "GET", exp + "?limit=100000", {}, None, 400, "invalid_limit"),
        ("text page size", "GET", exp + "?limit=ten", {}, None, 400, "invalid_limit"),
        ("garbage cursor", "GET", exp + "?cursor=%00%01garbage", {}, None, 400, "invalid_cursor"),
        ("forged cursor", "GET", exp + "?cursor=eyJhZnRlciI6ICIuLi8uLiJ9", {}, None, 400, "invalid_cursor"),
        # ids
        ("path traversal in book id", "GET", "/books/..%2F..%2Fetc%2Fpasswd", {}, None, 404, "not_found"),
        ("dot segments in export id", "GET", f"/books/{BOOK}/exports/%2e%2e", {}, None, 404, "not_found"),
        ("unicode book id", "GET", "/books/%E2%98%83%F0%9F%93%9A", {}, None, 404, "not_found"),
        ("unicode export id", "DELETE", f"/books/{BOOK}/exports/%C3%A9t%C3%A9", {}, None, 404, "not_found"),
        ("sql in id", "GET", "/books/1%27%20OR%20%271%27%3D%271", {}, None, 404, "not_found"),
        ("overlong id", "GET", "/books/" + "a" * 5000, {}, None, 404, "not_found"),
        ("unknown route", "PATCH", f"/books/{BOOK}/exports", {}, "{}", 404, None),
        ("svg asset", "POST", f"/books/{BOOK}/assets", {}, SVG_ASSET, 422, "svg_refused"),
        ("asset name escapes the book", "DELETE", f"/books/{BOOK}/assets/..%2F..%2Fetc", {}, None, 422,
         "invalid_asset_name"),
        ("asset name with a scheme", "PUT", f"/books/{BOOK}/assets/https:%2F%2Fx.test%2Fa.png", {},
         '{"upload_id": "0123456789abcdef01234567"}', 422, "invalid_asset_name"),
        ("adopting what was never uploaded", "PUT", f"/books/{BOOK}/assets/a.png", {},
         '{"upload_id": "0123456789abcdef01234567s9"}', 422, "upload_not_found"),
        ("metadata with a bad isbn", "PATCH", f"/books/{BOOK}", {}, '{"metadata": {"identifier": "1"}}', 422,
         "invalid_metadata"),
        ("an option the format lacks", "POST", f"/books/{BOOK}/exports", {},
         '{"format": "html", "options": {"page_size": "a4"}}', 422, "unknown_option"),
    ]  # fmt: skip
    return cases


CASES = _cases()


def _snapshot(stack: RunningStack) -> tuple[Any, Any]:
    session = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    )
    items = session.client("dynamodb", endpoint_url=stack.aws).scan(TableName="bindery")["Items"]
    objects = (
        session.client("s3", endpoint_url=stack.aws)
        .list_objects_v2(Bucket="bindery-artifacts")
        .get("Contents", [])
    )
    # The GC's own bookkeeping (its audit rows and reconciliation cursor, under GC#) changes every run,
    # whatever the requests do, and so does the events feed (FEED#, EVT#), which the webhook ingest writes
    # as earlier exports' events arrive: everything else is compared.
    kept = [i for i in items if not i["pk"]["S"].startswith(("GC#", "FEED#", "EVT#"))]
    return sorted(json.dumps(i, sort_keys=True) for i in kept), sorted((o["Key"], o["Size"]) for o in objects)


def _owned_state(stack: RunningStack, book: str, export_id: str) -> tuple[Any, Any, Any, str]:
    """What a stranger's request must not change: which items exist (the GC's own aside), the book's row,
    its objects (its manuscripts and its built pieces); and the export's state, which only its worker, sweeps
    and owner move. Only this book's objects: an earlier test's html export may still be building, and its
    worker writes that book's pieces under books/pieces/ in the meantime."""
    items, objects = _snapshot(stack)
    rows = [json.loads(i) for i in items]
    keys = sorted((r["pk"]["S"], r["sk"]["S"]) for r in rows)
    [book_row] = [r for r in rows if r["pk"]["S"] == f"BOOK#{book}" and r["sk"]["S"] == "BOOK"]
    [export_row] = [r for r in rows if r["sk"]["S"] == f"EXPORT#{export_id}"]
    manuscripts = [o for o in objects if o[0].startswith((f"books/{book}/", f"books/pieces/{book}/"))]
    return keys, book_row, manuscripts, export_row["state"]["S"]


def _quiet_snapshot(stack: RunningStack, timeout: float = 60.0) -> tuple[Any, Any]:
    """A snapshot of a system with nothing left to do: the same twice, two sweep periods apart. (Links
    here live 8 s, so an export's row moves on by itself until its link has lapsed and its bytes are gone;
    a snapshot taken before that would see the sweeps' writes, not the hostile requests'.)"""
    deadline = time.monotonic() + timeout
    last = _snapshot(stack)
    while True:
        time.sleep(2.5)
        now = _snapshot(stack)
        if now == last:
            return now
        assert time.monotonic() < deadline, "the stack never went quiet"
        last = now


def _wait_until_its_bytes_are_gone(
    stack: RunningStack, owner: dict[str, str], book: str, export_id: str, timeout: float = 90.0
) -> None:
    """Until the export has been built, its link has lapsed and the GC has deleted its bytes: after that
    nothing moves it by itself. (A snapshot taken while the build still queued, two of its reads 2.5 s
    apart alike, saw the worker's writes as the hostile requests'; found in CI once instances ran side
    by side.)"""
    s3 = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    ).client("s3", endpoint_url=stack.aws)
    deadline = time.monotonic() + timeout
    while True:
        state = requests.get(
            f"{stack.api}/books/{book}/exports/{export_id}", headers=owner, timeout=10
        ).json()["state"]
        kept = s3.list_objects_v2(Bucket="bindery-artifacts", Prefix=f"artifacts/{book}/").get("KeyCount", 0)
        if state == "expired" and kept == 0:
            return
        assert time.monotonic() < deadline, f"export {export_id} still {state}, {kept} objects kept"
        time.sleep(0.5)


def test_at_least_40_hostile_requests_get_their_4xx_and_write_nothing(stack: RunningStack) -> None:
    assert len(CASES) >= 40
    owner = auth(stack.token)
    book = requests.post(
        f"{stack.api}/books", headers=owner, json={"title": "Target", "manuscript": "# A\n\nx\n"}, timeout=10
    ).json()["id"]
    export_id = requests.post(
        f"{stack.api}/books/{book}/exports", headers=owner, json={"format": "markdown"}, timeout=10
    ).json()["id"]
    _wait_until_its_bytes_are_gone(stack, owner, book, export_id)
    before = _quiet_snapshot(stack)
    wrong = []
    for name, method, path, headers, body, status, code in CASES:
        url = stack.api + path.replace(BOOK, book).replace(EXPORT, export_id)
        sent_headers = {**owner, "Content-Type": "application/json", **headers}
        if sent_headers.get("Authorization") == "":
            del sent_headers["Authorization"]
        reply = requests.request(method, url, headers=sent_headers, data=body, timeout=30)
        got_code = None
        if reply.headers.get("Content-Type", "").startswith("application/json") and reply.content:
            got_code = (reply.json().get("error") or {}).get("code")
        if reply.status_code != status or (code is not None and got_code != code):
            wrong.append(f"{name}: got {reply.status_code} {got_code}, want {status} {code}")
    after = _snapshot(stack)
    wrote = after != before
    broken = promises_broken(stack)
    record("hostile requests sent through the HTTP API", len(CASES))
    record("hostile requests answered other than documented, or that wrote", len(wrong) + wrote)
    record("hostile requests: promises broken afterwards", len(broken))
    assert wrong == [] and broken == []
    assert not wrote, (set(after[0]) ^ set(before[0]), set(after[1]) ^ set(before[1]))


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/books/{b}"),
        ("GET", "/books/{b}/exports"),
        ("GET", "/books/{b}/exports/{e}"),
        ("POST", "/books/{b}/exports"),
        ("DELETE", "/books/{b}/exports/{e}"),
        ("PUT", "/books/{b}/manuscript"),
        ("POST", "/books/{b}/uploads"),
        ("DELETE", "/books/{b}"),
    ],
)
def test_bola_matrix_every_route_owner_stranger_and_no_token(
    stack: RunningStack, method: str, path: str
) -> None:
    owner = auth(stack.token)
    book = requests.post(
        f"{stack.api}/books", headers=owner, json={"title": "Owned", "manuscript": "# A\n"}, timeout=10
    ).json()["id"]
    export_id = requests.post(
        f"{stack.api}/books/{book}/exports", headers=owner, json={"format": "markdown"}, timeout=10
    ).json()["id"]
    body = {"POST": {"format": "html"}, "PUT": {"manuscript": "# B\n"}}.get(method)
    stranger = auth(tokens.mint("mallory"))
    before = _owned_state(stack, book, export_id)
    theirs = requests.request(
        method, stack.api + path.format(b=book, e=export_id), headers=stranger, json=body, timeout=10
    )
    missing = requests.request(
        method, stack.api + path.format(b="f" * 20, e="f" * 21), headers=stranger, json=body, timeout=10
    )
    nobody = requests.request(method, stack.api + path.format(b=book, e=export_id), json=body, timeout=10)
    after = _owned_state(stack, book, export_id)
    served = requests.request(
        method, stack.api + path.format(b=book, e=export_id), headers=owner, json=body, timeout=10
    )

    assert theirs.status_code == 404 and theirs.content == missing.content
    assert nobody.status_code == 401
    # Nor did the stranger or the anonymous caller change anything: the same items, the same book row and
    # manuscript objects, and the export not ended by them (the worker and the sweeps may move it on).
    assert after[:3] == before[:3], (set(after[0]) ^ set(before[0]), after[1:3], before[1:3])
    assert after[3] in ("pending", "ready", "expired") and before[3] in ("pending", "ready", "expired")
    assert served.status_code in (200, 201, 202, 204)
