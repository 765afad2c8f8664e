"""The names the local stack answers to: its own loopback name and port, nothing else.

Both of its servers (the API and the embedded AWS) listen on 127.0.0.1 alone, but a web page can still
reach them: its script asks its own name, whose DNS answer it then turns to 127.0.0.1 (DNS rebinding), and
the browser, seeing the same origin, lets it read the answers. What it cannot change is the Host header:
the browser sends the page's own name. So a request whose Host is not the server's own is refused before
anything acts on it: the gateway's docs page, routes, token check and handlers, or moto (RFC 9110
§15.5.20: 421, the request was sent to a server that does not serve that name).
"""

from __future__ import annotations

import json

HOST_NOT_ALLOWED = "host_not_allowed"
# The names of this machine's loopback that the servers listen on. [::1] is not one: they bind 127.0.0.1.
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
MISDIRECTED = 421


def own_hosts(port: int) -> frozenset[str]:
    """The Host values of a request sent to 127.0.0.1:`port` by name, as HTTP clients write them: the port
    left out only when it is HTTP's default."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        hosts.update(LOOPBACK_NAMES)
    return frozenset(hosts)


def is_own(host: str | None, port: int) -> bool:
    # Names are case-insensitive (RFC 9110 §4.2.3); an absent Host is no one's.
    return host is not None and host.strip().lower() in own_hosts(port)


def refusal(port: int) -> bytes:
    """The JSON body of the refusal, in the API's error shape."""
    message = (
        f"this server answers only requests addressed to 127.0.0.1:{port} or localhost:{port} "
        "(the Host header): the local stack is its owner's"
    )
    return json.dumps({"error": {"code": HOST_NOT_ALLOWED, "message": message}}).encode()
