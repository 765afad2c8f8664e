"""Edges a caller found from outside (issue 28): answers that contradicted their own docs, and states that
changed after they had ended. Each test is named after the promise it now holds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.calls import recording
from tests.unit.conftest import Stack


def _table(stack: Stack) -> list[dict[str, Any]]:
    return sorted(
        (item.attribute_values for item in stack.store.m.item.scan()), key=lambda v: (v["pk"], v["sk"])
    )


# ---- 1: an id that could not exist is a 404, whatever the route ------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("tail", ["g", "z", "-"])
def test_an_export_id_whose_shard_digit_is_not_hex_is_a_404_and_writes_nothing(
    stack: Stack, method: str, tail: str
) -> None:
    book = stack.create_book()
    real = stack.submit(book).body["id"]
    before = _table(stack)
    for export_id in (real[:-1] + tail, "abcdefgh" if tail != "-" else "abcdefg-"):
        with recording(stack.store.client, stack.objects.client) as calls:
            reply = stack.http(method, f"/books/{book}/exports/{export_id}")
        assert (reply.status, reply.body["error"]["code"]) == (404, "not_found"), export_id
        assert calls.writes() == []
    assert _table(stack) == before


# ---- 6: If-Match is a quoted revision, as the README says -------------------------------------------


@pytest.mark.parametrize("if_match", ["3", "1", '"1', '1"', "W/1", '"1", "2"', ""])
def test_an_unquoted_if_match_is_400_and_the_revision_stays(stack: Stack, if_match: str) -> None:
    book = stack.create_book()
    before = _table(stack)
    for method, path, body in (
        ("PATCH", f"/books/{book}", {"title": "Renamed"}),
        ("PUT", f"/books/{book}/manuscript", {"manuscript": "# New\n\ntext\n"}),
    ):
        reply = stack.http(method, path, body=body, headers={"If-Match": if_match})
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_if_match"), (method, if_match)
    assert _table(stack) == before
    assert stack.http("GET", f"/books/{book}").body["revision"] == 1


def test_a_quoted_if_match_still_works(stack: Stack) -> None:
    book = stack.create_book()
    reply = stack.http("PATCH", f"/books/{book}", body={"title": "Renamed"}, headers={"If-Match": '"1"'})
    assert (reply.status, reply.body["revision"], reply.headers["ETag"]) == (200, 2, '"2"')
    stale = stack.http("PATCH", f"/books/{book}", body={"title": "Again"}, headers={"If-Match": '"1"'})
    assert (stale.status, stale.body["error"]["code"]) == (412, "revision_mismatch")
