"""Whom the local stack answers: a request addressed to its own loopback name and port, sent by no page but
its own.

Both of its servers (the API and the embedded AWS) listen on 127.0.0.1 alone, but a web page can still
reach them in two ways.

- DNS rebinding: its script asks its own name, whose DNS answer it then turns to 127.0.0.1, and the
  browser, seeing the same origin, lets it read the answers. What it cannot change is the Host header: the
  browser sends the page's own name. So a request whose Host is not the server's own is refused (RFC 9110
  §15.5.20: 421, the request was sent to a server that does not serve that name).
- A cross-site request: a form's POST, or an <img>'s GET, sent to 127.0.0.1:PORT itself, with the right
  Host. The page cannot read the answer, but the request acts: moto checks no signature, so an unsigned
  multipart/form-data POST to the bucket plants an object. What the page cannot hide is whose it is: a
  browser sends `Origin` with every cross-origin POST, PUT and DELETE (`null` from a sandboxed frame or a
  file), and `Sec-Fetch-Site: cross-site` with any request another site's page makes. So a request with an
  `Origin` other than the server's own, or from another site, is refused (403). The stack's own callers
  send neither: curl, the CLI and boto3 no `Origin`, and Swagger UI on the API's /docs its own origin.

Both refusals come before anything acts on the request: the gateway's docs page, routes, token check and
handlers, or moto.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

HOST_NOT_ALLOWED = "host_not_allowed"
ORIGIN_NOT_ALLOWED = "origin_not_allowed"
# The names of this machine's loopback that the servers listen on. [::1] is not one: they bind 127.0.0.1.
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
MISDIRECTED = int(HTTPStatus.MISDIRECTED_REQUEST)
FORBIDDEN = int(HTTPStatus.FORBIDDEN)
# Sec-Fetch-Site's value for a request made by a page of another site (Fetch Metadata).
CROSS_SITE = "cross-site"
# A request target in absolute form: a scheme, then `://` (RFC 9112 §3.2.2).
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Refusal:
    """What a server answers a request that is not its owner's, in the API's error shape."""

    status: int
    body: bytes

    @property
    def status_line(self) -> str:
        return f"{self.status} {HTTPStatus(self.status).phrase}"


def own_hosts(port: int) -> frozenset[str]:
    """The Host values of a request sent to 127.0.0.1:`port` by name, as HTTP clients write them: the port
    left out only when it is HTTP's default."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        hosts.update(LOOPBACK_NAMES)
    return frozenset(hosts)


def own_origins(port: int) -> frozenset[str]:
    """The Origin values of the server's own pages (RFC 6454 §6.1: the default port left out)."""
    return frozenset(f"http://{host}" for host in own_hosts(port))


def is_own(host: str | None, port: int) -> bool:
    # Names are case-insensitive (RFC 9110 §4.2.3); an absent Host is no one's.
    return host is not None and host.strip().lower() in own_hosts(port)


def is_another_pages(origin: str | None, fetch_site: str | None, port: int) -> bool:
    """Whether a browser sent the request for a page that is not the server's own."""
    if fetch_site is not None and fetch_site.strip().lower() == CROSS_SITE:
        return True
    # Present and not the server's own: another site's, another port's on this machine, `null`, or two
    # Origin headers joined (one of which is then someone else's).
    return origin is not None and origin.strip().lower() not in own_origins(port)


def refusal_for(
    host: str | None, origin: str | None, fetch_site: str | None, port: int, target: str | None = None
) -> Refusal | None:
    """Why the server at 127.0.0.1:`port` answers no more than a refusal to this request, if it does. A
    request `target` in absolute form (`http://name:port/path`, which proxies are sent) names the server it
    is for by its authority, and a server must go by that rather than the Host header (RFC 9112 §3.2.2)."""
    if target is not None and _ABSOLUTE.match(target):
        host = urlsplit(target).netloc  # (an absolute form's authority; one without is no one's)
    if not is_own(host, port):
        message = (
            f"this server answers only requests addressed to 127.0.0.1:{port} or localhost:{port} "
            "(the Host header): the local stack is its owner's"
        )
        return _refusal(MISDIRECTED, HOST_NOT_ALLOWED, message)
    if is_another_pages(origin, fetch_site, port):
        message = (
            f"this server answers no request a browser sends for another origin's page than "
            f"http://127.0.0.1:{port} or http://localhost:{port} (the Origin and Sec-Fetch-Site headers): "
            "the local stack is its owner's"
        )
        return _refusal(FORBIDDEN, ORIGIN_NOT_ALLOWED, message)
    return None


def _refusal(status: int, code: str, message: str) -> Refusal:
    return Refusal(status, json.dumps({"error": {"code": code, "message": message}}).encode())
