"""The delivery path on moto, with a scripted receiver: each event once per subscribed endpoint, attempts on
the stated schedule until acked, rejected or expired, every attempt recorded, counts that equal the rows,
endpoints disabled by a run of failures or a 410, deliveries withdrawn, redelivery, and lost answers."""

from __future__ import annotations

import json
import socket
import threading
import types
from datetime import UTC, datetime

import botocore.endpoint
import pytest
from standardwebhooks.webhooks import Webhook

from bindery import outbound
from bindery.faults import StorageError
from bindery.outbound import Sent
from bindery.states import DeliveryState
from bindery.storage.hookmodels import DELIVERY_STATES
from tests.calls import recording
from tests.unit.conftest import Stack
from tests.unit.hooks import Hooked, answers_lost, hooked
from tests.unit.test_lost_answers import throttled

URL = "https://hooks.example.com/bindery"
OTHER = "https://other.example.com/in"


@pytest.fixture
def h(stack: Stack) -> Hooked:
    return hooked(stack)


def _ready(h: Hooked) -> tuple[str, str]:
    book = h.stack.create_book()
    export = h.stack.submit(book, "markdown").body["id"]
    h.stack.services.builds.build(book, export)
    return book, export


def _counts_equal_rows(h: Hooked, endpoint_id: str) -> None:
    """The ledger's counts, as the endpoint shows them, equal its rows, state by state."""
    shown = h.endpoint(endpoint_id)["deliveries"]
    rows, _ = h.stack.store.deliveries.list_deliveries(endpoint_id, None, 100, None)
    assert shown == {s: sum(d.state == s for d in rows) for s in DELIVERY_STATES}


def test_500_twice_then_200_is_three_attempts_on_the_schedule_and_ends_acked(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500, 500, 200)
    _ready(h)
    h.publish()

    assert h.send_all() == ["queued"]
    assert h.retry_round(47) == []  # 60 s with the jitter at its middle: not due yet
    assert h.retry_round(13) == ["queued"]
    assert h.retry_round(299) == []
    assert h.retry_round(1) == ["acked"]

    delivery = h.delivery(ep)
    assert delivery["state"] == "acked"
    assert [a["status"] for a in delivery["attempts"]] == [500, 500, 200]
    assert [a["n"] for a in delivery["attempts"]] == [1, 2, 3]
    assert len(h.receiver.got[URL]) == 3
    assert h.endpoint(ep)["consecutive_failures"] == 0
    _counts_equal_rows(h, ep)


def test_every_attempt_carries_the_same_event_id_and_a_signature_of_the_body(h: Hooked) -> None:
    made = h.register(URL)
    h.receiver.answer(URL, 503, 200)
    _ready(h)
    h.publish()
    h.send_all()
    h.retry_round(60)

    sent = h.receiver.got[URL]
    assert len(sent) == 2
    ids = {headers["webhook-id"] for headers, _ in sent}
    assert len(ids) == 1
    for headers, body in sent:
        at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        expected = Webhook(made["secret"]).sign(headers["webhook-id"], at, body.decode())
        assert headers["webhook-signature"] == expected
        event = json.loads(body)
        assert event["id"] == headers["webhook-id"] and event["type"] == "bindery.export.ready"
    feed = h.stack.http("GET", "/events").body["events"]
    assert [e["id"] for e in feed] == list(ids)  # the feed and the webhook carry the same event
    assert {k: v for k, v in feed[0].items() if k != "cursor"} == json.loads(sent[0][1])


def test_a_400_is_one_attempt_and_ends_rejected(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 400)
    _ready(h)
    h.publish()

    assert h.send_all() == ["rejected"]
    assert h.retry_round(86_400) == []
    assert h.delivery(ep)["state"] == "rejected"
    assert len(h.receiver.got[URL]) == 1
    _counts_equal_rows(h, ep)


@pytest.mark.parametrize("status", [408, 409, 425, 429, 301, "timeout", "address_refused"])
def test_answers_that_mean_not_now_are_retried(h: Hooked, status: int | str) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, status, 200)
    _ready(h)
    h.publish()

    assert h.send_all() == ["queued"]
    assert h.retry_round(60) == ["acked"]
    attempts = h.delivery(ep)["attempts"]
    assert [a["status"] if isinstance(status, int) else a["error"] for a in attempts[:1]] == [status]


def test_a_status_line_dripped_past_the_deadline_is_retried_not_acked(h: Hooked) -> None:
    """Issue 28, item 10, on real sockets at a tenth of its pace: the receiver drips `HTTP/1.1 200 OK` a
    byte every 70 ms, and the attempt's 1 s ends after `HTTP/1.1 200 O`."""
    ep = h.register(URL)["id"]
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def drip() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    if stop.wait(0.07):
                        return
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        return

        threading.Thread(target=drip, daemon=True).start()
        h.d.post = lambda url, body, headers, *, local_http: outbound.post(
            f"http://127.0.0.1:{port}/in", body, headers, local_http=True, read_timeout=3.0, deadline=1.0
        )
        _ready(h)
        h.publish()
        try:
            outcomes = h.send_all()
        finally:
            stop.set()

    assert outcomes == ["queued"]
    delivery = h.delivery(ep)
    assert [(a["status"], a["error"]) for a in delivery["attempts"]] == [(None, "deadline")]
    assert delivery["next_attempt_at"] is not None
    _counts_equal_rows(h, ep)


@pytest.mark.parametrize("status", [200, 400, 410])
def test_an_answer_the_deadline_cut_short_is_retried_whatever_its_status(h: Hooked, status: int) -> None:
    ep = h.register(URL)["id"]
    h.receiver.script[URL].extend([Sent(status, "deadline", "par", 10_000), Sent(200, None, "ok", 7)])
    _ready(h)
    h.publish()

    assert h.send_all() == ["queued"]
    assert h.endpoint(ep)["enabled"] is True  # a 410 the deadline cut is not the receiver's word
    assert h.retry_round(60) == ["acked"]
    attempts = h.delivery(ep)["attempts"]
    assert [(a["status"], a["error"]) for a in attempts] == [(status, "deadline"), (200, None)]
    _counts_equal_rows(h, ep)


def test_a_delivery_that_never_succeeds_expires_after_its_budget(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    outcomes = h.send_all()
    for delay in h.stack.exports.settings.webhook_delays[1:]:
        outcomes += h.retry_round(delay)

    assert outcomes == ["queued"] * 7 + ["expired"]
    delivery = h.delivery(ep)
    assert delivery["state"] == "expired" and len(delivery["attempts"]) == 8
    assert h.retry_round(86_400) == []  # ended: the sweep has nothing more
    _counts_equal_rows(h, ep)


def test_a_delivery_whose_window_ends_first_expires_without_another_attempt(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    h.send_all()
    h.stack.clock.advance(86_400)  # the sender was away: the next attempt is due, and the window is over

    assert h.retry_round(0) == ["expired"]
    assert len(h.receiver.got[URL]) == 1
    assert h.delivery(ep)["state"] == "expired"


def test_a_410_disables_the_endpoint_at_once_and_a_patch_enables_it(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 410)
    _ready(h)
    h.publish()

    assert h.send_all() == ["rejected"]
    shown = h.endpoint(ep)
    assert (shown["enabled"], shown["disabled_reason"]) == (False, "gone")
    assert shown["disabled_at"] is not None
    enabled = h.stack.http("PATCH", f"/webhooks/{ep}", body={"enabled": True}).body
    assert (enabled["enabled"], enabled["disabled_at"], enabled["consecutive_failures"]) == (True, None, 0)


def test_a_run_of_failures_disables_the_endpoint_and_its_waiting_deliveries_wait(stack: Stack) -> None:
    stack.services.settings = settings = type(stack.services.settings)(
        **{**stack.services.settings.__dict__, "webhook_disable_after": 3}
    )
    h = hooked(stack)
    h.stack.store.settings = settings
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    h.send_all()
    h.retry_round(60)
    h.retry_round(300)  # the third failure in a row

    shown = h.endpoint(ep)
    assert (shown["enabled"], shown["disabled_reason"], shown["consecutive_failures"]) == (
        False,
        "3_consecutive_failures",
        3,
    )
    assert h.retry_round(1800) == ["deferred:disabled"]  # due, but not sent to a disabled endpoint
    assert len(h.receiver.got[URL]) == 3
    h.stack.http("PATCH", f"/webhooks/{ep}", body={"enabled": True})
    h.receiver.answer(URL, 200)
    h.receiver.script[URL].popleft()
    assert h.retry_round(600) == ["acked"]


def test_an_event_replayed_or_redriven_makes_one_delivery_per_endpoint(h: Hooked) -> None:
    one, two = h.register(URL)["id"], h.register(OTHER)["id"]
    _ready(h)
    h.publish()
    h.publish()  # the bus, or the queue, delivers the same event again

    assert sorted(h.send_all()) == ["acked", "acked", "ended:acked", "ended:acked"]
    for ep, url in ((one, URL), (two, OTHER)):
        assert h.delivery(ep)["state"] == "acked"
        assert len(h.receiver.got[url]) == 1
    assert h.stack.store.feed.feed_head("user-alice") == 1


def test_only_subscribed_endpoints_registered_before_the_event_get_it(h: Hooked) -> None:
    ready_only = h.register(URL)["id"]
    failed_only = h.register(OTHER, events=["bindery.export.failed"])["id"]
    _ready(h)
    h.publish()
    h.send_all()
    h.stack.clock.advance(5)
    late = h.register("https://late.example.com/")["id"]
    h.publish()  # the same event, redriven after the late endpoint was registered

    assert h.send_all() == ["ended:acked"]
    assert h.endpoint(ready_only)["deliveries"]["acked"] == 1
    assert sum(h.endpoint(failed_only)["deliveries"].values()) == 0
    assert sum(h.endpoint(late)["deliveries"].values()) == 0


def test_deleting_an_endpoint_withdraws_its_queued_deliveries(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    h.send_all()
    assert h.stack.http("DELETE", f"/webhooks/{ep}").status == 204

    h.stack.clock.advance(1)
    swept = h.d.sweep()
    assert swept["withdrawn"] == 1
    rows, _ = h.stack.store.deliveries.list_deliveries(ep, None, 10, None)
    assert [d.state for d in rows] == ["withdrawn"]
    assert h.retry_round(60) == []
    assert len(h.receiver.got[URL]) == 1
    assert h.stack.http("GET", f"/webhooks/{ep}").status == 404


def test_a_delivery_whose_book_was_deleted_before_it_was_sent_is_withdrawn(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    book, _ = _ready(h)
    h.publish()
    assert h.stack.http("DELETE", f"/books/{book}").status == 204

    assert h.send_all() == ["withdrawn"]
    assert h.receiver.got[URL] == []
    _counts_equal_rows(h, ep)


def test_redeliver_sends_an_ended_delivery_again_as_a_new_attempt_of_the_same_delivery(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 400, 200)
    _ready(h)
    h.publish()
    h.send_all()
    seq = h.delivery(ep)["id"]

    again = h.stack.http("POST", f"/webhooks/{ep}/deliveries/{seq}/redeliver")
    twice = h.stack.http("POST", f"/webhooks/{ep}/deliveries/{seq}/redeliver")  # it is queued: refused

    assert (again.status, again.body["state"]) == (202, "queued")
    assert (twice.status, twice.body["error"]["code"]) == (409, "not_ended")
    assert h.retry_round(0) == ["acked"]
    delivery = h.delivery(ep)
    assert (delivery["id"], delivery["redeliveries"]) == (seq, 1)
    assert [(a["status"], a["redelivery"]) for a in delivery["attempts"]] == [(400, False), (200, True)]
    _counts_equal_rows(h, ep)


def test_a_duplicate_send_message_sends_one_attempt(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    _ready(h)
    h.publish()
    keys = h.keys.drain()

    first = [h.d.send(e, s) for e, s in keys]
    second = [h.d.send(e, s) for e, s in keys]  # SQS delivers the message again

    assert (first, second) == (["acked"], ["ended:acked"])
    assert len(h.receiver.got[URL]) == 1
    assert h.delivery(ep)["attempts"][0]["n"] == 1


def test_a_sender_that_died_mid_attempt_is_taken_over_once_its_lease_runs_out(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    _ready(h)
    h.publish()
    ((e, s),) = h.keys.drain()
    d = h.stack.store.deliveries.read_delivery(e, s)
    assert d is not None
    assert h.stack.store.deliveries.claim_delivery(d, "dead-sender", h.stack.clock(), d.budget) is not None

    assert h.d.send(e, s) == "in_flight"  # the lease is running: not taken from it
    assert h.retry_round(h.stack.exports.settings.webhook_lease_seconds) == ["acked"]
    attempts = h.delivery(ep)["attempts"]
    assert [(a["n"], a["error"], a["status"]) for a in attempts] == [
        (1, "no_answer_recorded", None),
        (2, None, 200),
    ]
    _counts_equal_rows(h, ep)


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_lost_answer_on_any_delivery_write_repeats_nothing(h: Hooked, nth: int, applied: bool) -> None:
    """The 1st TransactWriteItems makes the delivery, the 2nd claims it, the 3rd records the attempt: each
    times out, applied (its answer lost) or not, and botocore's resend is recognised as the write it
    repeats, or makes it."""
    ep = h.register(URL)["id"]
    _ready(h)
    client = h.stack.store.client
    with answers_lost(client, "TransactWriteItems", nth=nth + 1, applied=applied):  # 1st: the feed's append
        h.publish()
        outcomes = h.send_all()

    assert outcomes == ["acked"]
    assert len(h.receiver.got[URL]) == 1
    assert [a["n"] for a in h.delivery(ep)["attempts"]] == [1]
    _counts_equal_rows(h, ep)


def test_reading_the_ledger_and_the_feed_writes_nothing(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    _ready(h)
    h.publish()
    h.send_all()
    with recording(h.stack.store.client) as calls:
        for path in ("/webhooks", f"/webhooks/{ep}", f"/webhooks/{ep}/deliveries", "/events"):
            assert h.stack.http("GET", path).status == 200
    assert calls.writes() == []
    assert DeliveryState.ACKED.value == h.delivery(ep)["state"]


def test_a_sweep_near_its_timeout_leaves_the_withdrawals_for_the_next_run(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    h.send_all()
    h.stack.http("DELETE", f"/webhooks/{ep}")
    h.stack.clock.advance(1)

    late = h.d.sweep(time_left=lambda: 5.0)
    on_time = h.d.sweep(time_left=lambda: 50.0)

    assert (late["withdrawn"], on_time["withdrawn"]) == (0, 1)


def test_with_the_jitter_at_its_most_every_attempt_of_the_budget_still_happens(stack: Stack) -> None:
    h = hooked(stack)
    h.d.jitter = lambda: 1.0  # every wait 20 % longer: the last would land past the 24 h window
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    h.send_all()
    for _ in range(10):  # the sweep, running every minute, sends each attempt when it is due
        waiting = h.delivery(ep)
        if waiting["state"] != "queued":
            break
        due = datetime.fromisoformat(waiting["next_attempt_at"].replace("Z", "+00:00")).timestamp()
        h.retry_round(max(0.0, due - h.stack.clock()))

    delivery = h.delivery(ep)
    assert (delivery["state"], len(delivery["attempts"])) == ("expired", 8)
    last = datetime.fromisoformat(delivery["attempts"][-1]["at"].replace("Z", "+00:00")).timestamp()
    first = datetime.fromisoformat(delivery["attempts"][0]["at"].replace("Z", "+00:00")).timestamp()
    assert last - first < h.stack.exports.settings.webhook_window_seconds


def test_a_redelivery_to_a_disabled_endpoint_is_refused_until_it_is_enabled(h: Hooked) -> None:
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 410)
    _ready(h)
    h.publish()
    h.send_all()
    seq = h.delivery(ep)["id"]

    refused = h.stack.http("POST", f"/webhooks/{ep}/deliveries/{seq}/redeliver")
    h.stack.http("PATCH", f"/webhooks/{ep}", body={"enabled": True})
    accepted = h.stack.http("POST", f"/webhooks/{ep}/deliveries/{seq}/redeliver")

    assert (refused.status, refused.body["error"]["code"]) == (409, "endpoint_disabled")
    assert accepted.status == 202


# ---- a claim that never became a POST ------------------------------------------------------------------


@pytest.fixture
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))


def _send_through_faults(h: Hooked) -> list[str]:
    """Each key drained and sent; a send that ends in a fault is "fault" (SQS would send it again)."""
    out = []
    for ep, seq in h.keys.drain():
        try:
            out.append(h.d.send(ep, seq))
        except StorageError:
            out.append("fault")
    return out


def _every_attempt_of_the_schedule(h: Hooked) -> list[str]:
    outcomes = h.retry_round(h.stack.exports.settings.webhook_lease_seconds)
    for delay in h.stack.exports.settings.webhook_delays[1:]:
        outcomes += h.retry_round(delay)
    return outcomes


@pytest.mark.usefixtures("no_retry_sleep")
def test_an_attempt_whose_claim_lost_every_answer_is_never_sent_and_spends_none_of_the_budget(
    h: Hooked,
) -> None:
    """Issue 28, item 11: the claim is applied and every answer to it lost, so its sender never POSTs. Once
    its lease runs out it is recorded `no_answer_recorded`, and the receiver still gets all 8 attempts."""
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    with answers_lost(h.stack.store.client, "TransactWriteItems") as lost:
        assert _send_through_faults(h) == ["fault"]
    assert len(lost) == 4  # the claim, then botocore's three resends, each refused by the first
    assert h.receiver.got[URL] == []
    assert h.delivery(ep)["state"] == "in_flight"  # applied: its lease holds it

    assert _every_attempt_of_the_schedule(h) == ["queued"] * 7 + ["expired"]
    assert len(h.receiver.got[URL]) == 8
    delivery = h.delivery(ep)
    assert [(a["n"], a["error"]) for a in delivery["attempts"][:2]] == [(1, "no_answer_recorded"), (2, None)]
    assert [a["status"] for a in delivery["attempts"][1:]] == [500] * 8
    assert delivery["attempts_allowed"] == 9
    _counts_equal_rows(h, ep)


def test_an_attempt_whose_claim_failed_before_it_was_applied_is_claimed_afresh(h: Hooked) -> None:
    """The other side of the same fault: the claim never reached the table. Nothing was taken, nothing is
    recorded, and the next send claims attempt 1 as if the first had not been."""
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, 500)
    _ready(h)
    h.publish()
    with throttled(h.stack.store.client, "TransactWriteItems"):
        assert _send_through_faults(h) == ["fault"]
    assert h.receiver.got[URL] == []
    assert h.delivery(ep)["state"] == "queued"
    h.keys.send([(ep, int(h.delivery(ep)["id"]))])  # SQS sends the message again

    assert _send_through_faults(h) + _every_attempt_of_the_schedule(h) == ["queued"] * 7 + ["expired"]
    delivery = h.delivery(ep)
    assert [(a["n"], a["status"]) for a in delivery["attempts"]] == [(n, 500) for n in range(1, 9)]
    assert delivery["attempts_allowed"] == 8
    _counts_equal_rows(h, ep)


@pytest.mark.usefixtures("no_retry_sleep")
def test_claims_that_always_lose_their_answers_end_after_three_lapses_given_back_and_the_budget(
    h: Hooked,
) -> None:
    """However often a claim is applied and its answer lost, a delivery is claimed at most 8 + 3 times: the
    first three lapses are given back, every one after counts, and the last ends it `expired`."""
    ep = h.register(URL)["id"]
    _ready(h)
    h.publish()
    lease = h.stack.exports.settings.webhook_lease_seconds
    outcomes = []
    with answers_lost(h.stack.store.client, "TransactWriteItems"):
        outcomes += _send_through_faults(h)
        for _ in range(20):
            h.stack.clock.advance(lease)
            h.d.sweep()
            outcomes += _send_through_faults(h)

    assert outcomes == ["fault"] * 12  # 11 claims, then the ending, applied with its answer lost too
    assert h.receiver.got[URL] == []
    delivery = h.delivery(ep)
    assert delivery["state"] == "expired"
    assert [(a["n"], a["error"]) for a in delivery["attempts"]] == [
        (n, "no_answer_recorded") for n in range(1, 12)
    ]
    _counts_equal_rows(h, ep)


def _end_delivery(h: Hooked, how: str) -> tuple[str, str]:
    """A delivery ended `how`; its endpoint and book."""
    ep = h.register(URL)["id"]
    h.receiver.answer(URL, {"acked": 200, "rejected": 400}.get(how, 500))
    book, _ = _ready(h)
    h.publish()
    if how == "withdrawn":
        assert h.stack.http("DELETE", f"/books/{book}").status == 204
        assert h.send_all() == ["withdrawn"]
        return ep, book
    outcomes = h.send_all()
    if how == "expired":
        h.stack.clock.advance(86_400)  # its window is over
        outcomes = h.retry_round(0)
    assert outcomes == [how]
    return ep, book


@pytest.mark.parametrize("how", ["acked", "rejected", "expired", "withdrawn"])
def test_an_ended_delivery_keeps_its_ending_under_every_later_write(h: Hooked, how: str) -> None:
    """A delivery ended each way it can, then every write it can meet but the caller's redeliver: the same
    send message again, the event replayed, the sweep's rounds, its book deleted and its endpoint disabled
    and deleted. Its state and every attempt recorded stay as they ended; the receiver hears nothing more."""
    ep, book = _end_delivery(h, how)
    ended = h.delivery(ep)
    heard = len(h.receiver.got[URL])

    h.stack.clock.advance(1)
    assert h.d.send(ep, int(ended["id"])) == f"ended:{how}"  # a duplicate message: no attempt
    h.publish()  # the event redriven: its key is queued again, and its send finds the ending
    assert set(h.send_all()) <= {f"ended:{how}"}
    assert h.retry_round(3600) == []
    h.stack.http("DELETE", f"/books/{book}")
    assert h.stack.http("PATCH", f"/webhooks/{ep}", body={"enabled": False}).status == 200
    assert h.retry_round(86_400) == []
    assert h.delivery(ep) == ended
    assert h.stack.http("DELETE", f"/webhooks/{ep}").status == 204
    h.stack.clock.advance(1)
    h.d.sweep()
    rows, _ = h.stack.store.deliveries.list_deliveries(ep, None, 10, None)
    assert [(d.state, len(d.attempts)) for d in rows] == [(how, len(ended["attempts"]))]
    assert len(h.receiver.got[URL]) == heard
