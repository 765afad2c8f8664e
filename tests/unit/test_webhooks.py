"""Webhook endpoints over the API, on moto: registered under a cap with a secret shown once, another
caller's id answered as a missing one, hostile URLs refused with a 422 that names why, secrets rotated with
an overlap, and the events feed read by cursor."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from tests.unit.conftest import Stack
from tests.unit.hooks import Hooked, answers_lost, hooked
from tests.unit.test_deliveries import URL, _ready

BOB = "user-bob"


@pytest.fixture
def h(stack: Stack) -> Hooked:
    return hooked(stack)


def test_the_secret_is_in_the_answer_that_made_it_and_in_no_read(h: Hooked) -> None:
    made = h.stack.http("POST", "/webhooks", body={"url": URL, "events": ["bindery.export.ready"]})

    assert made.status == 201
    assert made.headers["Location"] == f"/webhooks/{made.body['id']}"
    assert made.body["secret"].startswith("whsec_") and len(made.body["secret"]) == 6 + 44
    for path in (f"/webhooks/{made.body['id']}", "/webhooks"):
        assert made.body["secret"] not in str(h.stack.http("GET", path).body)
    assert h.endpoint(made.body["id"])["secrets"] == [{"current": True, "expires_at": None}]


def test_the_cap_refuses_one_endpoint_more_and_a_delete_frees_its_place(h: Hooked) -> None:
    cap = h.stack.exports.settings.max_webhooks
    ids = [h.register(f"https://h{i}.example.com/")["id"] for i in range(cap)]

    over = h.stack.http("POST", "/webhooks", body={"url": URL, "events": ["bindery.export.ready"]})
    assert (over.status, over.body["error"]["code"], over.body["error"]["limit"]) == (
        409,
        "too_many_webhooks",
        cap,
    )
    assert h.stack.http("DELETE", f"/webhooks/{ids[0]}").status == 204
    assert h.stack.http("DELETE", f"/webhooks/{ids[0]}").status == 404  # deleted once, freed once
    h.register(URL)
    again = h.stack.http("POST", "/webhooks", body={"url": URL, "events": ["bindery.export.ready"]})
    assert again.status == 409


def test_a_registration_whose_answer_was_lost_is_one_endpoint(h: Hooked) -> None:
    with answers_lost(h.stack.store.client, "TransactWriteItems", nth=1):
        made = h.register(URL)

    listed = h.stack.http("GET", "/webhooks").body["webhooks"]
    assert [e["id"] for e in listed] == [made["id"]]


def test_another_callers_endpoint_answers_exactly_as_a_missing_one(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    missing = "0" * 21
    for method, suffix, body in (
        ("GET", "", None),
        ("PATCH", "", {"description": "mine now"}),
        ("DELETE", "", None),
        ("POST", "/rotate-secret", None),
        ("GET", "/deliveries", None),
        ("POST", "/deliveries/1/redeliver", None),
    ):
        theirs = h.stack.http(method, f"/webhooks/{ep}{suffix}", caller=BOB, body=body)
        nothing = h.stack.http(method, f"/webhooks/{missing}{suffix}", caller=BOB, body=body)
        assert (theirs.status, theirs.body) == (nothing.status, nothing.body) == (404, nothing.body)
    assert h.stack.http("GET", "/webhooks", caller=BOB).body["webhooks"] == []
    assert h.endpoint(ep)["description"] == ""  # Bob's PATCH changed nothing


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://hooks.example.com/in", "webhook_url_not_https"),
        ("https://localhost/in", "webhook_url_private_address"),
        ("https://127.0.0.1/in", "webhook_url_private_address"),
        ("https://[::1]/in", "webhook_url_private_address"),
        ("https://169.254.169.254/latest/meta-data", "webhook_url_private_address"),
        ("https://10.0.0.1/in", "webhook_url_private_address"),
        ("https://intranet.bindery.test/in", "webhook_url_private_address"),
        ("https://user:secret@hooks.example.com/in", "webhook_url_has_credentials"),
        ("https://hooks.example.com/" + "a" * 2048, "webhook_url_too_long"),
    ],
)
def test_a_hostile_url_is_refused_with_a_422_that_names_why_and_nothing_is_written(
    h: Hooked, url: str, code: str
) -> None:
    h.stack.services.hooks.resolve = lambda host, port: (
        ["10.0.0.5"] if host.endswith(".bindery.test") else ["93.184.216.34"]
    )
    refused = h.stack.http("POST", "/webhooks", body={"url": url, "events": ["bindery.export.ready"]})

    assert (refused.status, refused.body["error"]["code"]) == (422, code)
    assert h.stack.http("GET", "/webhooks").body["webhooks"] == []


def test_a_registration_whose_dns_never_answers_is_a_422_within_the_lookup_deadline(h: Hooked) -> None:
    answered = threading.Event()

    def stuck(host: str, port: int) -> list[str]:
        answered.wait(30)  # released below, once the answer is in hand
        return ["93.184.216.34"]

    h.stack.services.hooks.resolve, h.stack.services.hooks.lookup_seconds = stuck, 0.05
    try:
        refused = h.stack.http("POST", "/webhooks", body={"url": URL, "events": ["bindery.export.ready"]})
        assert not answered.is_set()  # the deadline answered, while the lookup was still waiting
    finally:
        answered.set()
    assert (refused.status, refused.body["error"]["code"]) == (422, "webhook_url_invalid")
    assert h.stack.http("GET", "/webhooks").body["webhooks"] == []


def test_an_unknown_event_name_is_refused_and_the_known_ones_listed(h: Hooked) -> None:
    refused = h.stack.http("POST", "/webhooks", body={"url": URL, "events": ["bindery.export.ready", "x.y"]})

    assert (refused.status, refused.body["error"]["code"]) == (422, "unknown_event")
    assert "x.y" in refused.body["error"]["message"]
    assert "bindery.export.failed" in refused.body["error"]["known"]


def test_a_patch_changes_the_endpoint_and_a_patch_after_delete_finds_nothing(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    changed = h.stack.http(
        "PATCH", f"/webhooks/{ep}", body={"events": ["bindery.export.failed"], "description": "ops"}
    )
    assert (changed.status, changed.body["events"], changed.body["description"]) == (
        200,
        ["bindery.export.failed"],
        "ops",
    )
    h.stack.http("DELETE", f"/webhooks/{ep}")
    assert h.stack.http("PATCH", f"/webhooks/{ep}", body={"description": "back"}).status == 404


def test_a_rotated_secret_signs_beside_the_old_one_during_the_overlap_and_alone_after(h: Hooked) -> None:
    made = h.register(URL)
    rotated = h.stack.http("POST", f"/webhooks/{made['id']}/rotate-secret").body
    old, new = Webhook(made["secret"]), Webhook(rotated["secret"])
    overlap = h.stack.exports.settings.webhook_secret_overlap_seconds
    assert [s["current"] for s in rotated["secrets"]] == [True, False]
    _ready(h)
    h.publish()
    h.send_all()
    h.stack.clock.advance(overlap)
    book = h.stack.create_book()
    export = h.stack.submit(book, "markdown").body["id"]
    h.stack.services.builds.build(book, export)
    h.publish()
    h.send_all()

    (during, _), (after, _) = h.receiver.got[URL][0], h.receiver.got[URL][1]
    body_during, body_after = (b.decode() for _, b in h.receiver.got[URL])

    def signs(webhook: Webhook, headers: dict[str, str], body: str) -> bool:
        at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        return webhook.sign(headers["webhook-id"], at, body) in headers["webhook-signature"].split(" ")

    assert signs(new, during, body_during) and signs(old, during, body_during)
    assert signs(new, after, body_after) and not signs(old, after, body_after)
    assert h.endpoint(made["id"])["secrets"] == [{"current": True, "expires_at": None}]


def test_two_rotations_from_the_same_secrets_cannot_both_become_current(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    store, now = h.stack.store, h.stack.clock()
    seen = store.endpoints.read_endpoint("user-alice", ep)
    assert seen is not None

    first = store.endpoints.rotate_secret(seen, "whsec_" + "A" * 44, now)
    second = store.endpoints.rotate_secret(seen, "whsec_" + "B" * 44, now)

    assert first is not None and second is None
    assert store.endpoints.read_endpoint("user-alice", ep).secrets[0].key == "whsec_" + "A" * 44  # type: ignore[union-attr]


def test_the_feed_pages_by_cursor_and_refuses_a_cursor_past_its_head(h: Hooked) -> None:
    for _ in range(3):
        _ready(h)
    h.publish()
    first = h.stack.http("GET", "/events", query={"limit": "2"}).body
    rest = h.stack.http("GET", "/events", query={"after": first["next_cursor"], "limit": "2"}).body
    ahead = h.stack.http("GET", "/events", query={"after": "9"})
    bad = h.stack.http("GET", "/events", query={"after": "-1"})

    assert [e["cursor"] for e in first["events"]] == ["1", "2"]
    assert [e["cursor"] for e in rest["events"]] == ["3"]
    assert (first["head"], rest["next_cursor"]) == ("3", "3")
    assert (ahead.status, ahead.body["error"]["code"], ahead.body["error"]["head"]) == (
        400,
        "invalid_cursor",
        "3",  # a cursor is a string wherever it is shown: the page's head, and the refusal's
    )
    assert (bad.status, bad.body["error"]["code"]) == (400, "invalid_cursor")
    assert h.stack.http("GET", "/events", caller=BOB).body == {"events": [], "head": "0", "next_cursor": "0"}


def test_a_cursor_older_than_the_feed_keeps_is_gone_with_the_oldest_cursor_kept(h: Hooked) -> None:
    _ready(h)
    h.publish()
    h.stack.clock.advance(h.stack.exports.settings.ended_retention_seconds + 1)
    _ready(h)
    h.publish()

    gone = h.stack.http("GET", "/events", query={"after": "0"})
    kept = h.stack.http("GET", "/events", query={"after": gone.body["error"]["oldest_cursor"]})

    assert (gone.status, gone.body["error"]["code"]) == (410, "cursor_expired")
    assert [e["cursor"] for e in kept.body["events"]] == ["2"]


def test_a_second_rotation_inside_the_overlap_keeps_the_first_ones_promise(h: Hooked) -> None:
    made = h.register(URL)
    overlap = h.stack.exports.settings.webhook_secret_overlap_seconds
    h.stack.http("POST", f"/webhooks/{made['id']}/rotate-secret")
    h.stack.clock.advance(overlap / 2)
    h.stack.http("POST", f"/webhooks/{made['id']}/rotate-secret")

    signing = h.stack.store.endpoints.read_endpoint("user-alice", made["id"])
    assert signing is not None
    first = [s for s in signing.secrets if s.key == made["secret"]]
    assert len(signing.secrets) == 3
    assert first and first[0].not_after == h.stack.clock() + overlap / 2  # its 24 h, not cut short
