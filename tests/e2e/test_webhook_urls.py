"""Hostile webhook registrations against a stack that checks URLs as a deployment does (https, public
addresses only): each is refused with a 422 that names the reason, and nothing is registered.

There is no DNS here: the stack resolves the names in BINDERY_LOCAL_HOSTS to the addresses given
(bindery_local.stack), one of them private, one public. `localhost` is loopback by RFC 6761."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from bindery_local import tokens
from tests.e2e.stack import RunningStack, auth, start
from tests.servers import free_port

WEBHOOK_LOCAL_HTTP = False
HOSTS = {"intranet.bindery.test": "10.0.0.5", "hooks.bindery.test": "93.184.215.14"}
PUBLIC = "https://hooks.bindery.test/h"
READY = ["bindery.export.ready"]


@pytest.fixture(scope="module")
def deployed() -> Iterator[RunningStack]:
    running = start(free_port(), local_http=WEBHOOK_LOCAL_HTTP, BINDERY_LOCAL_HOSTS=json.dumps(HOSTS))
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()


HOSTILE = [
    ("http", "http://example.com/h", READY, "webhook_url_not_https"),
    ("http to loopback", "http://127.0.0.1:8080/h", READY, "webhook_url_not_https"),
    ("localhost", "https://localhost/h", READY, "webhook_url_private_address"),
    ("loopback v4", "https://127.0.0.1/h", READY, "webhook_url_private_address"),
    ("loopback v6", "https://[::1]/h", READY, "webhook_url_private_address"),
    ("instance metadata", "https://169.254.169.254/latest", READY, "webhook_url_private_address"),
    ("private v4", "https://10.0.0.1/h", READY, "webhook_url_private_address"),
    ("a name of a private address", "https://intranet.bindery.test/h", READY, "webhook_url_private_address"),
    ("credentials", "https://u:p@example.com/", READY, "webhook_url_has_credentials"),
    ("2049 characters", "https://example.com/" + "a" * (2049 - 20), READY, "webhook_url_too_long"),
    ("unknown event", PUBLIC, [*READY, "bindery.export.exploded"], "unknown_event"),
]


@pytest.mark.parametrize(("url", "events", "code"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_a_hostile_registration_is_refused_with_a_422_naming_why_and_registers_nothing(
    deployed: RunningStack, url: str, events: list[str], code: str
) -> None:
    who = auth(tokens.mint("hostile"))
    refused = requests.post(
        f"{deployed.api}/webhooks", headers=who, json={"url": url, "events": events}, timeout=10
    )

    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == code
    listed = requests.get(f"{deployed.api}/webhooks", headers=who, timeout=10)
    assert listed.status_code == 200 and listed.json()["webhooks"] == []


def test_a_public_name_registers_on_the_same_stack(deployed: RunningStack) -> None:
    """The control: what the refusals above differ in is the reason they name, not a stack that takes
    nothing (another caller, so the hostile caller's list stays empty)."""
    who = auth(tokens.mint("welcome"))
    made = requests.post(
        f"{deployed.api}/webhooks", headers=who, json={"url": PUBLIC, "events": READY}, timeout=10
    )

    assert made.status_code == 201, made.text
    assert made.json()["url"] == PUBLIC and made.json()["secret"].startswith("whsec_")
    listed = requests.get(f"{deployed.api}/webhooks", headers=who, timeout=10).json()["webhooks"]
    assert [w["id"] for w in listed] == [made.json()["id"]]
