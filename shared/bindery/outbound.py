"""Sending one webhook delivery to a caller's URL, without becoming a way into someone else's network.

A webhook URL is an address a stranger chose, and Bindery's own servers call it. If nothing checks it, it
is server-side request forgery. `https://169.254.169.254/latest/...` asks the instance metadata service
for credentials. `https://10.0.0.1/admin` reaches a neighbour in the VPC that trusts anything inside it.
The reply's excerpt, which the caller can read, carries what was found back out. So a URL is checked
twice. `check_url` checks it at registration: https only, no credentials, no fragment, and a host that is
a public unicast address or resolves only to such addresses. `post` checks again at send time, because a
name can resolve to a public address at registration and to 127.0.0.1 a minute later (DNS rebinding).
`post` then connects to the address it checked, never to the name, so a second lookup cannot change the
answer. Both lookups run under a deadline, since the caller's DNS answers them. A redirect is never
followed, because a 3xx from a public host can point at a private one: the 3xx is the delivery's status.
The reply is read only up to 64 KiB and within one wall-clock deadline, so a slow or endless reply cannot
hold a worker. In local mode (the local stack), loopback may also be called, over http or https.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import urllib3
import urllib3.connection
from urllib3.exceptions import HTTPError, ReadTimeoutError, SSLError

Resolver = Callable[[str, int], list[str]]  # (host, port) -> IP strings; raises OSError when there are none
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Refusal = Literal["webhook_url_invalid", "webhook_url_not_https", "webhook_url_has_credentials",
                  "webhook_url_too_long", "webhook_url_private_address"]  # fmt: skip
# connect_failed: no answer at all (refused, unreachable, dropped, or the name stopped resolving). timeout:
# one read took longer than read_timeout. deadline: the whole attempt took longer than `deadline`.
# address_refused: the name now resolves to an address that may not be called. url_refused: the stored
# URL no longer passes check_url. Neither of the last two connects.
Failure = Literal["timeout", "connect_failed", "address_refused", "tls_failed", "deadline", "url_refused"]

MAX_URL = 2048
MAX_READ = 64 * 1024  # no more of a reply is read than this: only its excerpt is kept
EXCERPT = 1024
CHUNK = 8 * 1024
USER_AGENT = "Bindery-Webhooks/1"
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")  # a host name after IDNA: nothing a parser could split
_PATH_SAFE = "/%:@!$&'()*+,;=-._~?"  # kept as is in a path or a query; anything else is percent-encoded
LOOKUP_SECONDS = 5.0  # the most a registration waits for the caller's DNS to answer

# What may be called is decided by these lists, not by the running Python's ipaddress tables, which differ
# between versions (3.11.7 calls 192.0.0.192 global; 3.12.4 and 3.13 changed 2001::/23 and 2002::/16).
# IPv4: every block of IANA's special-purpose registry that is not a public receiver, and multicast.
_NOT_PUBLIC_V4 = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # private
    "100.64.0.0/10",  # shared address space: a carrier's NAT, the far side of it someone's network
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local: the instance metadata service, 169.254.169.254
    "192.0.0.0/24",  # IETF protocol assignments, its anycast addresses too: none is a webhook receiver
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",  # documentation
    "192.88.99.0/24",  # 6to4 relay anycast, deprecated: it forwards into whatever IPv6 it is handed
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
))  # fmt: skip
# IPv6: only global unicast, 2000::/3, is addressed to the internet at all. Outside it lie loopback, the
# unspecified address, IPv4-mapped and -compatible addresses, NAT64 (64:ff9b::/96, 64:ff9b:1::/48), discard
# (100::/64), unique local (fc00::/7: the metadata service's fd00:ec2::254), link- and site-local,
# multicast, and SRv6 (5f00::/16). Inside it, these blocks are not public receivers either:
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NOT_PUBLIC_V6 = tuple(ipaddress.IPv6Network(n) for n in (
    "2001::/23",  # IETF protocol assignments: Teredo (2001::/32), which ends at any IPv4; benchmarking
    "2001:db8::/32", "3fff::/20",  # documentation
))  # fmt: skip


class UrlRefused(ValueError):
    def __init__(self, code: Refusal, message: str) -> None:
        super().__init__(message)
        self.code: Refusal = code
        self.message = message


@dataclass(frozen=True)
class Sent:
    status: int | None  # set once its status line and headers came whole, even if the body then failed
    error: Failure | None
    excerpt: str
    latency_ms: int

    @property
    def delivered(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


def system_resolve(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def _ip(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def address_allowed(ip: str | Address) -> bool:
    """Only a public unicast address, and only if the IPv4 address a 6to4 address carries is one too."""
    address = ip if not isinstance(ip, str) else _ip(ip)
    if address is None:
        return False  # a resolver's answer that is not an address is not one this can vouch for
    if isinstance(address, ipaddress.IPv4Address):
        return not any(address in block for block in _NOT_PUBLIC_V4)
    if address not in _GLOBAL_UNICAST_V6 or any(address in block for block in _NOT_PUBLIC_V6):
        return False
    # 6to4 (2002::/16) ends at the IPv4 address inside it: 2002:7f00:1::1 is loopback's.
    return address.sixtofour is None or address_allowed(address.sixtofour)


class _WholeLines:
    """The reader of a reply's head, which refuses a line that the connection's end cut short."""

    def __init__(self, fp: Any) -> None:
        self.fp = fp

    def readline(self, limit: int = -1) -> bytes:
        line: bytes = self.fp.readline(limit)
        if not line.endswith(b"\n"):
            raise http.client.IncompleteRead(line)
        return line


class _WholeHead(http.client.HTTPResponse):
    """A reply whose status line and headers all came, each line to its end. http.client reads what came
    before the end of the connection as whole: `HTTP/1.1 200 O`, cut there by the watchdog or by the
    server, would be a 200, and headers that stop at the end of the connection would be all of them."""

    def begin(self) -> None:
        fp, self.fp = self.fp, _WholeLines(self.fp)  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            self.fp = fp


class _Kept(urllib3.connection.HTTPConnection):
    response_class = _WholeHead

    kept: socket.socket | None = None  # its socket, even after a `Connection: close` reply let go of it

    opened: list[socket.socket] | None = None  # where a post's watchdog finds the sockets it may cut

    def _new_conn(self) -> socket.socket:
        # The raw socket, before any TLS handshake on it: the watchdog can cut a handshake dripped slowly.
        sock: socket.socket = super()._new_conn()
        if self.opened is not None:
            self.opened.append(sock)
        return sock

    def connect(self) -> None:
        super().connect()
        self.kept = self.sock


class _KeptTLS(_Kept, urllib3.connection.HTTPSConnection):
    pass


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # lower-case ASCII (IDNA); an IPv6 literal without its brackets
    port: int
    path: str  # path and query, percent-encoded

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.scheme == "https" else 80) else f"{host}:{self.port}"


def _invalid(why: str) -> UrlRefused:
    return UrlRefused("webhook_url_invalid", f"The webhook URL is not valid: {why}.")


def _parse(url: str, *, local_http: bool) -> _Target:
    if len(url) > MAX_URL:
        raise UrlRefused("webhook_url_too_long", f"A webhook URL is at most {MAX_URL} characters.")
    # A space or a control character is where one URL parser splits a URL and another does not.
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise _invalid("it contains whitespace or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:  # an unclosed [, or a port that is not a number from 0 to 65535
        raise _invalid(str(e)) from e
    if parts.scheme != "https" and not (parts.scheme == "http" and local_http):
        raise UrlRefused("webhook_url_not_https", "A webhook URL must use https.")
    if "@" in parts.netloc:  # credentials end up in logs, and `good.example@evil.example` hides the host
        raise UrlRefused("webhook_url_has_credentials", "A webhook URL may not carry a user or password.")
    if "#" in url:
        raise _invalid("it has a fragment, which is never sent")
    host = parts.hostname
    if not host or port == 0:
        raise _invalid("it has no host" if not host else "port 0 cannot be called")
    literal = _ip(host)
    if isinstance(literal, ipaddress.IPv6Address) and literal.scope_id:
        raise _invalid("an IPv6 zone cannot be called")  # fe80::1%eth0 names a link of this machine's
    if literal is None:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as e:
            raise _invalid(f"{host!r} is not a host name") from e
        if not _NAME.fullmatch(host):
            raise _invalid(f"{host!r} is not a host name")
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    query = f"?{quote(parts.query, safe=_PATH_SAFE)}" if parts.query else ""
    return _Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path + query)


def _addresses(target: _Target, resolve: Resolver) -> list[str]:
    if _ip(target.host) is not None:
        return [target.host]
    name = target.host.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return ["127.0.0.1", "::1"]  # RFC 6761: loopback, whatever a resolver would answer
    try:
        return list(dict.fromkeys(resolve(target.host, target.port)))
    except (OSError, UnicodeError):
        return []


def _vet(target: _Target, ips: list[str], *, local_http: bool) -> None:
    """Refuses the target unless EVERY address may be called: a name with one private answer among public
    ones lets whoever runs its DNS steer some connections inside."""
    for ip in ips:
        loopback = local_http and (address := _ip(ip)) is not None and address.is_loopback
        if target.scheme == "http" and not loopback:  # local mode's http is for loopback only
            raise UrlRefused("webhook_url_not_https", "A webhook URL must use https.")
        if not loopback and not address_allowed(ip):
            why = f"{target.host} is or resolves to {ip}, which is not a public address."
            raise UrlRefused("webhook_url_private_address", why)


def _addresses_within(target: _Target, resolve: Resolver, seconds: float) -> list[str] | None:
    """`_addresses`, or None if the lookup has not answered within `seconds`. A lookup has no timeout of its
    own (getaddrinfo waits as long as the resolver's configuration says, on servers the name's owner runs):
    it runs on a thread of its own, which is left to end by itself when the deadline passes first."""
    found: list[list[str]] = []
    lookup = threading.Thread(target=lambda: found.append(_addresses(target, resolve)), daemon=True)
    lookup.start()
    lookup.join(seconds)
    return found[0] if found else None


def check_url(url: str, *, local_http: bool, resolve: Resolver = system_resolve,
              lookup_seconds: float = LOOKUP_SECONDS) -> str:  # fmt: skip
    """The URL, normalised, if a webhook may be registered at it; otherwise UrlRefused."""
    target = _parse(url, local_http=local_http)
    ips = _addresses_within(target, resolve, lookup_seconds)
    if ips is None:  # a DNS that never answers would hold the registering request to its timeout
        raise _invalid(f"{target.host} did not resolve within {lookup_seconds:g} s")
    if not ips:
        raise _invalid(f"{target.host} does not resolve")
    _vet(target, ips, local_http=local_http)
    return f"{target.scheme}://{target.authority}{target.path}"


def post(url: str, body: bytes, headers: dict[str, str], *, local_http: bool,
         resolve: Resolver = system_resolve, connect_timeout: float = 3.0, read_timeout: float = 5.0,
         deadline: float = 10.0, clock: Callable[[], float] = time.monotonic) -> Sent:  # fmt: skip
    """One delivery attempt. Trouble on the network is a Sent with an error, never an exception."""
    start = clock()
    status: int | None = None
    got = bytearray()

    def sent(error: Failure | None) -> Sent:
        excerpt = bytes(got[:EXCERPT]).decode("utf-8", errors="replace")
        return Sent(status, error, excerpt, max(0, round((clock() - start) * 1000)))

    try:
        target = _parse(url, local_http=local_http)
    except UrlRefused:
        return sent("url_refused")
    # The caller's DNS answers this lookup, so it too runs under the deadline.
    ips = _addresses_within(target, resolve, deadline)
    if ips is None:
        return sent("deadline")
    if not ips:
        return sent("connect_failed")
    try:
        _vet(target, ips, local_http=local_http)  # what the name resolves to NOW: DNS rebinding
    except UrlRefused:
        return sent("address_refused")
    ours = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "Host": target.authority}
    headers = {k: v for k, v in headers.items() if k.title() not in ours} | ours
    left = deadline - (clock() - start)
    if left <= 0:  # resolving has no timeout of its own, and urllib3 refuses a timeout that is not positive
        return sent("deadline")
    # The pool is given the checked IP, not the name, so nothing looks the name up after the check. TLS
    # still verifies the certificate against the name, and the Host header still carries it.
    pool: urllib3.HTTPConnectionPool = (
        urllib3.HTTPSConnectionPool(ips[0], target.port, server_hostname=target.host,
                                    assert_hostname=target.host, cert_reqs="CERT_REQUIRED", maxsize=1)
        if target.scheme == "https" else urllib3.HTTPConnectionPool(ips[0], target.port, maxsize=1)
    )  # fmt: skip
    opened: list[socket.socket] = []
    base = _KeptTLS if target.scheme == "https" else _Kept
    pool.ConnectionCls = type("_Watched", (base,), {"opened": opened})
    # A server that drips its status line and headers a byte at a time passes every per-read timeout, and
    # urllib3 reads those before the loop below can look at the clock: a watchdog cuts the socket at the
    # deadline, whatever is being read.
    cut = threading.Event()

    def cut_off() -> None:
        cut.set()
        for sock in opened:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(left, cut_off)
    watchdog.daemon = True
    watchdog.start()
    try:
        response = pool.urlopen("POST", target.path, body=body, headers=headers, retries=False,
                                redirect=False, preload_content=False, release_conn=False,
                                timeout=urllib3.Timeout(connect=min(connect_timeout, left),
                                                        read=min(read_timeout, left)))  # fmt: skip
        status = response.status  # a head read whole (_WholeHead): whatever the deadline cuts next
        try:
            while len(got) < MAX_READ:
                left = deadline - (clock() - start)
                if left <= 0:  # a reply dripped a byte at a time passes every per-read timeout
                    return sent("deadline")
                if (sock := getattr(response.connection, "kept", None)) is not None:
                    sock.settimeout(
                        min(read_timeout, left)
                    )  # nor may one read outlast the deadline (left > 0)
                chunk = response.read1(min(CHUNK, MAX_READ - len(got)), decode_content=False)
                if not chunk:
                    break
                got += chunk
        finally:
            response.close()  # the rest of a long reply is never read, so the connection is not reused
        # A body that ends at the connection's close looks whole when the watchdog shut it at the deadline.
        return sent("deadline" if cut.is_set() else None)
    except SSLError:
        return sent("deadline" if cut.is_set() else "tls_failed")
    except ReadTimeoutError:
        return sent("deadline" if cut.is_set() or clock() - start >= deadline else "timeout")
    except (HTTPError, OSError):  # refused, unreachable, timed out connecting, reset, or a garbled reply
        return sent("deadline" if cut.is_set() else "connect_failed")
    finally:
        watchdog.cancel()
        pool.close()
