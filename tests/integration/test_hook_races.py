"""The webhook guards against a real engine, under threads released together: one event ingested by many at
once is one feed entry and one delivery per endpoint; one due delivery sent by many at once is one attempt;
registrations racing for the last place under the cap take it once; redeliveries racing queue one."""

from __future__ import annotations

import json
import uuid

import pytest

from bindery.deliveries import Deliveries
from bindery.storage import Delivery, Endpoint, EndpointOverCap, Secret
from bindery.storage.hookmodels import DELIVERY_STATES
from tests.conftest import FakeClock
from tests.figures import record
from tests.integration.test_races import _all_at_once
from tests.services import Services
from tests.unit.hooks import Keys, Receiver, envelope

pytestmark = pytest.mark.ddb_local

URL = "https://hooks.example.com/in"
RACERS = 16


def _service(services: Services) -> tuple[Deliveries, Keys, Receiver]:
    keys, receiver = Keys(), Receiver()
    return (
        services.deliveries_with(keys, post=receiver, jitter=lambda: 0.5),
        keys,
        receiver,
    )


def _endpoint(services: Services, caller: str, url: str = URL) -> Endpoint:
    now = services.clock()
    made = services.store.endpoints.register_endpoint(
        Endpoint(
            id=uuid.uuid4().hex[:21],
            caller=caller,
            url=url,
            events=frozenset({"bindery.export.ready"}),
            description="",
            secrets=(Secret("whsec_" + "A" * 44, None),),
            enabled=True,
            disabled_at=None,
            disabled_reason=None,
            fails_in_row=0,
            created_at=now - 60,
            updated_at=now - 60,
            counts={s: 0 for s in DELIVERY_STATES},
        )
    )
    assert isinstance(made, Endpoint)
    return made


def _message(services: Services, caller: str) -> str:
    export = uuid.uuid4().hex[:21]
    detail = {"id": f"{export}:ready", "export_id": export, "book_id": None, "owner": caller,
              "format": "html", "state": "ready", "attempt": 1, "failure_code": ""}  # fmt: skip
    return envelope("bindery.export.ready", detail, services.clock())


def test_one_event_ingested_by_16_at_once_is_one_entry_and_one_delivery_per_endpoint(
    services: Services,
) -> None:
    caller = f"user-{uuid.uuid4().hex[:8]}"
    endpoints = [_endpoint(services, caller, f"https://h{i}.example.com/") for i in range(3)]
    service, _, _ = _service(services)
    message = _message(services, caller)

    _all_at_once(RACERS, lambda _: service.ingest(message))

    assert services.store.feed.feed_head(caller) == 1
    for endpoint in endpoints:
        rows, _ = services.store.deliveries.list_deliveries(endpoint.id, None, 100, None)
        shown = services.store.endpoints.read_endpoint(caller, endpoint.id)
        assert len(rows) == 1
        assert shown is not None and shown.counts["queued"] == 1
    record(
        "race: 16 ingests of one event: deliveries made for 3 endpoints",
        sum(len(services.store.deliveries.list_deliveries(e.id, None, 100, None)[0]) for e in endpoints),
    )


def test_one_due_delivery_sent_by_16_at_once_is_one_attempt(services: Services) -> None:
    caller = f"user-{uuid.uuid4().hex[:8]}"
    endpoint = _endpoint(services, caller)
    service, keys, receiver = _service(services)
    service.ingest(_message(services, caller))
    ((endpoint_id, seq),) = keys.drain()

    outcomes = _all_at_once(RACERS, lambda _: service.send(endpoint_id, seq))

    delivery = services.store.deliveries.read_delivery(endpoint_id, seq)
    shown = services.store.endpoints.read_endpoint(caller, endpoint.id)
    assert isinstance(delivery, Delivery) and shown is not None
    assert outcomes.count("acked") == 1
    assert len(receiver.got[URL]) == 1
    assert [a.n for a in delivery.attempts] == [1]
    assert (shown.counts["acked"], shown.counts["queued"], shown.counts["in_flight"]) == (1, 0, 0)
    record("race: 16 concurrent senders of one delivery: POSTs made", len(receiver.got[URL]))


def test_one_lapsed_delivery_taken_over_by_16_at_once_is_one_attempt_that_gives_its_place_back_once(
    services: Services, clock: FakeClock
) -> None:
    caller = f"user-{uuid.uuid4().hex[:8]}"
    endpoint = _endpoint(services, caller)
    service, keys, receiver = _service(services)
    service.ingest(_message(services, caller))
    ((endpoint_id, seq),) = keys.drain()
    queued = services.store.deliveries.read_delivery(endpoint_id, seq)
    assert queued is not None
    # A sender whose claim was applied, and who never sent it: the lease runs out.
    assert (
        services.store.deliveries.claim_delivery(queued, "lost", services.clock(), queued.budget) is not None
    )
    clock.advance(services.settings.webhook_lease_seconds)

    outcomes = _all_at_once(RACERS, lambda _: service.send(endpoint_id, seq))

    delivery = services.store.deliveries.read_delivery(endpoint_id, seq)
    shown = services.store.endpoints.read_endpoint(caller, endpoint.id)
    assert isinstance(delivery, Delivery) and shown is not None
    assert outcomes.count("acked") == 1 and len(receiver.got[URL]) == 1
    assert [(a.n, a.error) for a in delivery.attempts] == [(1, "no_answer_recorded"), (2, None)]
    assert delivery.budget == queued.budget + 1  # given back once, not once a racer
    assert (shown.counts["acked"], shown.counts["queued"], shown.counts["in_flight"]) == (1, 0, 0)
    record("race: 16 concurrent takeovers of one lapsed delivery: POSTs made", len(receiver.got[URL]))


def test_registrations_racing_for_the_last_place_under_the_cap_take_it_once(services: Services) -> None:
    caller = f"user-{uuid.uuid4().hex[:8]}"
    cap = services.settings.max_webhooks
    for i in range(cap - 1):
        _endpoint(services, caller, f"https://h{i}.example.com/")

    def register(i: int) -> Endpoint | EndpointOverCap:
        now = services.clock()
        return services.store.endpoints.register_endpoint(
            Endpoint(uuid.uuid4().hex[:21], caller, URL, frozenset({"bindery.export.ready"}), "",
                     (Secret(f"whsec_{i:044d}", None),), True, None, None, 0, now, now,
                     {s: 0 for s in DELIVERY_STATES})
        )  # fmt: skip

    outcomes = _all_at_once(8, register)

    assert sum(isinstance(o, Endpoint) for o in outcomes) == 1
    assert len(services.store.endpoints.endpoints_of(caller)) == cap
    record(
        "race: 8 registrations for the last place under the cap: accepted",
        sum(isinstance(o, Endpoint) for o in outcomes),
    )


def test_redeliveries_racing_on_one_ended_delivery_queue_it_once(services: Services) -> None:
    caller = f"user-{uuid.uuid4().hex[:8]}"
    endpoint = _endpoint(services, caller)
    service, keys, receiver = _service(services)
    receiver.answer(URL, 400)
    service.ingest(_message(services, caller))
    ((endpoint_id, seq),) = keys.drain()
    assert service.send(endpoint_id, seq) == "rejected"
    ended = services.store.deliveries.read_delivery(endpoint_id, seq)
    assert ended is not None

    outcomes = _all_at_once(8, lambda _: services.store.deliveries.redeliver(ended, services.clock()))

    shown = services.store.endpoints.read_endpoint(caller, endpoint.id)
    assert sum(o is not None for o in outcomes) == 1
    assert shown is not None and (shown.counts["queued"], shown.counts["rejected"]) == (1, 0)
    assert json.loads(json.dumps(shown.counts))["queued"] == 1
