"""bindery.outbound: a webhook URL that points inside someone's network is refused at registration, and
again at send time; a delivery over real sockets on 127.0.0.1 is bounded in time and in bytes, follows no
redirect, and connects to the address that was checked, never to the name again."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bindery.outbound import MAX_READ, Resolver, UrlRefused, address_allowed, check_url, post

PUBLIC = "93.184.216.34"


def dns(table: dict[str, list[str]]) -> Resolver:
    """A resolver that knows only these names; any other does not resolve, as getaddrinfo would say."""

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


NAMES = dns({"example.com": [PUBLIC], "hooks.example.com": [PUBLIC], "inside.example": ["10.0.0.5"],
             "mixed.example": [PUBLIC, "10.0.0.5"]})  # fmt: skip


@dataclass
class Hook:
    """A webhook receiver on 127.0.0.1: what it saw, how many connections it accepted, and how it answers."""

    answer: Callable[[BaseHTTPRequestHandler, Hook], None]
    stop: threading.Event = field(default_factory=threading.Event)
    seen: list[tuple[str, Any, bytes]] = field(default_factory=list)  # (path, headers, body)
    connections: int = 0
    port: int = 0


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler, Hook], None]], Hook]]:
    started: list[tuple[ThreadingHTTPServer, Hook]] = []

    def start(
        answer: Callable[[BaseHTTPRequestHandler, Hook], None], tls: ssl.SSLContext | None = None
    ) -> Hook:
        hook = Hook(answer)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hook.seen.append((self.path, self.headers, body))
                hook.answer(self, hook)

            do_GET = do_POST

            def log_message(self, *_: Any) -> None:
                pass

        class Counting(ThreadingHTTPServer):
            def get_request(self) -> tuple[socket.socket, Any]:
                accepted = super().get_request()
                hook.connections += 1
                return accepted

        httpd = Counting(("127.0.0.1", 0), Handler)
        if tls is not None:
            httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
        hook.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append((httpd, hook))
        return hook

    yield start
    for httpd, hook in started:
        hook.stop.set()  # a stalling or dripping answer gives up now, not at its own pace
        httpd.shutdown()
        httpd.server_close()


def reply(status: int, body: bytes = b"", **headers: str) -> Callable[[BaseHTTPRequestHandler, Hook], None]:
    def answer(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def refusal(url: str, *, local_http: bool = False, resolve: Resolver = NAMES) -> str:
    with pytest.raises(UrlRefused) as refused:
        check_url(url, local_http=local_http, resolve=resolve)
    return refused.value.code


# --- registration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, code",
    [
        ("http://example.com/h", "webhook_url_not_https"),
        ("ftp://x", "webhook_url_not_https"),
        ("https://localhost/h", "webhook_url_private_address"),  # never asked of DNS: NAMES lacks it
        ("https://127.0.0.1/h", "webhook_url_private_address"),
        ("https://[::1]/h", "webhook_url_private_address"),
        ("https://169.254.169.254/latest", "webhook_url_private_address"),
        ("https://10.0.0.1/h", "webhook_url_private_address"),
        ("https://[::ffff:10.0.0.1]/", "webhook_url_private_address"),
        ("https://[64:ff9b::7f00:1]/", "webhook_url_private_address"),
        ("https://[2002:7f00:1::1]/", "webhook_url_private_address"),  # ipaddress calls this global
        ("https://224.0.0.1/", "webhook_url_private_address"),  # and this
        ("https://0.0.0.0/", "webhook_url_private_address"),
        ("https://100.64.0.1/", "webhook_url_private_address"),
        ("https://inside.example/h", "webhook_url_private_address"),
        ("https://mixed.example/h", "webhook_url_private_address"),
        ("https://user:pass@example.com/", "webhook_url_has_credentials"),
        ("https://example.com/" + "a" * (2049 - len("https://example.com/")), "webhook_url_too_long"),
        ("https:///nohost", "webhook_url_invalid"),
        ("https://example.com/a b", "webhook_url_invalid"),
        ("https://exa\x00mple.com/", "webhook_url_invalid"),
        ("https://example.com/h#part", "webhook_url_invalid"),
        ("https://example.com:99999/", "webhook_url_invalid"),
        ("https://[::1/", "webhook_url_invalid"),
    ],
)
def test_a_hostile_registration_is_refused_with_the_code_that_names_why(url: str, code: str) -> None:
    assert refusal(url) == code


def test_a_name_that_does_not_resolve_is_refused_as_invalid_saying_so() -> None:
    with pytest.raises(UrlRefused) as refused:
        check_url("https://nowhere.example/h", local_http=False, resolve=NAMES)
    assert refused.value.code == "webhook_url_invalid"
    assert "does not resolve" in str(refused.value)


def test_a_public_https_url_is_registered_as_given() -> None:
    assert (
        check_url("https://hooks.example.com/x", local_http=False, resolve=NAMES)
        == "https://hooks.example.com/x"
    )


def test_a_registered_url_is_normalised_lower_case_without_its_default_port() -> None:
    url = "HTTPS://Hooks.Example.COM:443/x?a=1"
    assert check_url(url, local_http=False, resolve=NAMES) == "https://hooks.example.com/x?a=1"


def test_a_unicode_host_is_registered_as_its_idna_name_and_one_that_cannot_be_encoded_is_invalid() -> None:
    resolve = dns({"xn--bcher-kva.example": [PUBLIC]})
    assert check_url("https://Bücher.example/h", local_http=False, resolve=resolve) == (
        "https://xn--bcher-kva.example/h"
    )
    assert refusal("https://" + "ü" * 70 + ".example/h", resolve=resolve) == "webhook_url_invalid"


def test_a_url_of_exactly_2048_characters_is_not_too_long() -> None:
    url = "https://example.com/" + "a" * (2048 - len("https://example.com/"))
    assert check_url(url, local_http=False, resolve=NAMES) == url


def test_local_mode_allows_http_to_loopback_but_checks_everything_else_as_usual() -> None:
    assert check_url("http://127.0.0.1:8123/x", local_http=True, resolve=NAMES) == "http://127.0.0.1:8123/x"
    assert refusal("http://10.0.0.1/", local_http=True) == "webhook_url_not_https"
    assert refusal("https://10.0.0.1/", local_http=True) == "webhook_url_private_address"
    assert refusal("http://127.0.0.1:8123/x", local_http=False) == "webhook_url_not_https"


@pytest.mark.parametrize(
    "ip, allowed",
    [
        (PUBLIC, True),
        ("2606:4700:4700::1111", True),
        ("2002:5db8:d822::1", True),  # 6to4 of a public address
        ("ff02::1", False),  # multicast that ipaddress calls global
        ("fd00:ec2::254", False),
        ("::ffff:169.254.169.254", False),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
        ("192.0.2.1", False),
        ("not-an-address", False),
    ],
)
def test_only_public_unicast_addresses_are_allowed(ip: str, allowed: bool) -> None:
    assert address_allowed(ip) is allowed


# --- delivery over real sockets -------------------------------------------------------------------------


def test_a_200_returns_its_status_and_excerpt_and_the_server_sees_our_headers_and_the_body(
    serve: Any,
) -> None:
    hook = serve(reply(200, b'{"ok":true}'))
    given = {"webhook-id": "msg_1", "webhook-signature": "v1,abc", "host": "evil.example"}
    sent = post(f"http://127.0.0.1:{hook.port}/x?y=1", b'{"type":"t"}', given, local_http=True)

    assert (sent.status, sent.error, sent.excerpt, sent.delivered) == (200, None, '{"ok":true}', True)
    [(path, headers, body)] = hook.seen
    assert (path, body) == ("/x?y=1", b'{"type":"t"}')
    assert headers["webhook-id"] == "msg_1" and headers["webhook-signature"] == "v1,abc"
    assert headers.get_all("Host") == [f"127.0.0.1:{hook.port}"]  # a caller's Host cannot replace ours
    assert headers["Content-Type"] == "application/json" and headers["User-Agent"] == "Bindery-Webhooks/1"


def test_a_302_is_the_answer_and_its_location_is_never_requested(serve: Any) -> None:
    target = serve(reply(200))
    hook = serve(reply(302, Location=f"http://127.0.0.1:{target.port}/elsewhere"))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True)

    assert (sent.status, sent.error, sent.delivered) == (302, None, False)
    assert len(hook.seen) == 1 and target.connections == 0


def test_a_server_silent_past_the_read_timeout_is_a_timeout(serve: Any) -> None:
    hook = serve(lambda handler, hook: hook.stop.wait(3.0))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=0.3)

    assert (sent.status, sent.error) == (None, "timeout")
    assert 250 <= sent.latency_ms < 1500


def drip(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
    """A byte every 50 ms for 2 s: each read is quick, and the whole reply takes four times the deadline."""
    handler.send_response(200)
    handler.send_header("Content-Length", "40")
    handler.end_headers()
    for _ in range(40):
        if hook.stop.wait(0.05):
            return
        try:
            handler.wfile.write(b"x")
        except OSError:
            return


def test_a_reply_dripped_past_the_deadline_is_cut_off_at_the_deadline(serve: Any) -> None:
    hook = serve(drip)
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=0.3, deadline=0.5)

    assert (sent.status, sent.error) == (200, "deadline")
    assert 0 < len(sent.excerpt) < 20  # it did read, a byte at a time, until the deadline
    assert 450 <= sent.latency_ms < 1000


def drip_headers(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
    """The status line and headers a byte every 50 ms, for 2 s: urllib3 reads them before any body loop."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Padding: " + b"p" * 30 + b"\r\n\r\nok"
    for byte in head:
        if hook.stop.wait(0.05):
            return
        try:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
        except OSError:
            return


def test_headers_dripped_past_the_deadline_are_cut_off_at_the_deadline(serve: Any) -> None:
    hook = serve(drip_headers)
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=0.3, deadline=0.5)

    assert (sent.status, sent.error) == (None, "deadline")
    assert 450 <= sent.latency_ms < 1000


Answer = Callable[[BaseHTTPRequestHandler, Hook], None]


def raw(data: bytes, every: float = 0.0, close: bool = False) -> Answer:
    """An answer written as these bytes (one byte at a time, `every` seconds apart, if given), then held
    open until the test ends, or closed."""

    def answer(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
        for piece in [data[i : i + 1] for i in range(len(data))] if every else [data]:
            if every and hook.stop.wait(every):
                return
            try:
                handler.wfile.write(piece)
                handler.wfile.flush()
            except OSError:
                return
        if not close:
            hook.stop.wait(5.0)
        handler.close_connection = True

    return answer


def test_a_status_line_dripped_past_the_deadline_is_a_deadline_without_a_status(serve: Any) -> None:
    # Issue 28, item 10, at a tenth of its pace: a byte every 70 ms, the line's 17 bytes taking 1.19 s. The
    # watchdog cuts it at 1 s, after "HTTP/1.1 200 O", which http.client would read as a 200.
    hook = serve(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", every=0.07))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0, deadline=1.0)

    assert (sent.status, sent.error, sent.delivered) == (None, "deadline", False)


@pytest.mark.parametrize(
    "head",
    [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n", b"HTTP/1.1 204 No Con"],
    ids=["status-line-without-its-end", "headers-without-their-end", "status-line-cut-in-its-reason"],
)
def test_a_head_the_deadline_cuts_short_is_a_deadline_without_a_status(serve: Any, head: bytes) -> None:
    # The head comes at once, and its end never does: only the watchdog, at 0.5 s, ends the read.
    hook = serve(raw(head))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0, deadline=0.5)

    assert (sent.status, sent.error) == (None, "deadline")


def test_a_head_the_server_cuts_short_by_closing_is_no_answer(serve: Any) -> None:
    hook = serve(raw(b"HTTP/1.1 200 OK", close=True))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0)

    assert (sent.status, sent.error, sent.delivered) == (None, "connect_failed", False)


def test_a_body_that_ends_with_the_connection_is_cut_by_the_deadline_not_ended(serve: Any) -> None:
    # No Content-Length: the body ends where the connection does, and the watchdog's cut ends it too. On a
    # clock that stands still, no read's own timeout can end first: only the watchdog, on real time, does.
    hook = serve(raw(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart"))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0, deadline=0.5,
                clock=lambda: 0.0)  # fmt: skip

    assert (sent.status, sent.error, sent.excerpt, sent.delivered) == (200, "deadline", "part", False)


def test_a_body_that_ends_with_the_connection_before_the_deadline_is_the_answer(serve: Any) -> None:
    hook = serve(raw(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nwhole", close=True))
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0, deadline=2.0)

    assert (sent.status, sent.error, sent.excerpt, sent.delivered) == (200, None, "whole", True)


def test_a_reply_stalled_mid_body_is_cut_off_at_the_deadline_not_at_the_read_timeout(serve: Any) -> None:
    def stall(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        for _ in range(12):  # 0.6 s of the 1 s deadline goes by, a byte at a time,
            if hook.stop.wait(0.05):
                return
            handler.wfile.write(b"a")
        hook.stop.wait(3.0)  # then silence, shorter than read_timeout: only the time left can end the read

    hook = serve(stall)
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=3.0, deadline=1.0)

    assert (sent.status, sent.error, sent.excerpt) == (200, "deadline", "a" * 12)
    # A read given the first timeout (1 s, set when the headers came) would end at 1.6 s.
    assert 950 <= sent.latency_ms < 1400


def test_a_reply_longer_than_64_kib_is_read_only_to_64_kib(serve: Any) -> None:
    def endless(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
        # It promises 10 MiB, sends a little more than 64 KiB, then holds the connection open: a reader that
        # wanted one byte past the limit would wait out its read timeout and report "timeout".
        handler.send_response(200)
        handler.send_header("Content-Length", str(10 * 1024 * 1024))
        handler.end_headers()
        handler.wfile.write(b"y" * (MAX_READ + 16 * 1024))
        hook.stop.wait(3.0)

    hook = serve(endless)
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, read_timeout=1.0)

    assert (sent.status, sent.error) == (200, None)
    assert sent.excerpt == "y" * 1024
    assert sent.latency_ms < 900


def test_a_deadline_that_passes_while_the_server_answers_ends_the_attempt_before_the_body(serve: Any) -> None:
    now = [0.0]

    def answer_late(handler: BaseHTTPRequestHandler, hook: Hook) -> None:
        now[0] = 60.0  # a minute goes by on the clock post was given, between its request and our answer
        reply(200, b"late")(handler, hook)

    hook = serve(answer_late)
    sent = post(f"http://127.0.0.1:{hook.port}/x", b"{}", {}, local_http=True, clock=lambda: now[0])

    assert (sent.status, sent.error, sent.excerpt, sent.latency_ms) == (200, "deadline", "", 60_000)


def test_a_closed_port_is_connect_failed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    sent = post(f"http://127.0.0.1:{port}/x", b"{}", {}, local_http=True)
    assert (sent.status, sent.error) == (None, "connect_failed")


def test_https_to_a_server_that_does_not_speak_tls_is_tls_failed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(2.0)

        def answer_in_plain_text() -> None:
            with listener.accept()[0] as conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer_in_plain_text, daemon=True).start()
        sent = post(f"https://127.0.0.1:{listener.getsockname()[1]}/x", b"{}", {}, local_http=True)
    assert (sent.status, sent.error) == (None, "tls_failed")


def test_a_certificate_no_trusted_authority_signed_is_tls_failed(serve: Any, tmp_path: Any) -> None:
    # A certificate for exactly the name that is called, self-signed: only verification can refuse it.
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.bindery.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.bindery.test")]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = tmp_path / "hook.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    )  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(pem)
    hook = serve(reply(200), tls=tls)
    sent = post(f"https://hooks.bindery.test:{hook.port}/x", b"{}", {}, local_http=True,
                resolve=dns({"hooks.bindery.test": ["127.0.0.1"]}))  # fmt: skip

    assert (sent.status, sent.error) == (None, "tls_failed")
    assert hook.seen == []


# --- the address that is called is the address that was checked -------------------------------------------


def test_a_name_rebound_to_a_private_address_after_registration_is_refused_without_connecting(
    serve: Any,
) -> None:
    hook = serve(reply(200))
    url = f"https://rebind.example:{hook.port}/x"
    # Given a name that was public when it was registered,
    assert check_url(url, local_http=False, resolve=dns({"rebind.example": [PUBLIC]})) == url
    # when it resolves to loopback at send time, nothing is sent and nothing connects.
    rebound = dns({"rebind.example": ["127.0.0.1"]})
    sent = post(url, b"{}", {}, local_http=False, resolve=rebound, connect_timeout=0.5, read_timeout=0.5)
    assert (sent.status, sent.error) == (None, "address_refused")
    assert hook.connections == 0
    # The same name, where loopback may be called, does reach the server: the 0 above was the check's doing.
    allowed = post(url.replace("https", "http"), b"{}", {}, local_http=True, resolve=rebound)
    assert (allowed.status, hook.connections) == (200, 1)


def test_post_connects_to_the_resolved_address_and_sends_the_name_as_host(serve: Any) -> None:
    # hooks.bindery.test resolves nowhere but in this resolver: a second, real lookup would fail to connect.
    hook = serve(reply(204))
    sent = post(f"http://hooks.bindery.test:{hook.port}/x", b"{}", {}, local_http=True,
                resolve=dns({"hooks.bindery.test": ["127.0.0.1"]}))  # fmt: skip

    assert (sent.status, sent.error) == (204, None)
    [(_, headers, _)] = hook.seen
    assert headers["Host"] == f"hooks.bindery.test:{hook.port}"


def test_latency_is_measured_on_the_clock_given() -> None:
    ticks = iter([10.0, 10.5])
    sent = post(
        "https://inside.example/h", b"{}", {}, local_http=False, resolve=NAMES, clock=lambda: next(ticks)
    )
    assert (sent.error, sent.latency_ms) == ("address_refused", 500)


def test_a_tls_handshake_that_never_comes_is_cut_off_at_the_deadline() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts the connection, and never says a word of TLS
        port = listener.getsockname()[1]
        sent = post(
            f"https://hooks.bindery.test:{port}/x",
            b"{}",
            {},
            local_http=True,
            resolve=lambda host, p: ["127.0.0.1"],
            connect_timeout=3.0,
            deadline=0.5,
        )

    assert sent.error == "deadline"
    assert 450 <= sent.latency_ms < 1500


def test_a_resolver_slower_than_the_deadline_ends_the_attempt_at_the_deadline() -> None:
    def slow(host: str, port: int) -> list[str]:
        time.sleep(2)
        return ["93.184.216.34"]

    sent = post("https://hooks.example.com/x", b"{}", {}, local_http=False, resolve=slow, deadline=0.3)

    assert (sent.status, sent.error) == (None, "deadline")
    assert sent.latency_ms < 1000


@pytest.mark.parametrize("ip", ["fec0::1", "3fff::1"])
def test_site_local_and_documentation_ipv6_addresses_are_refused(ip: str) -> None:
    assert not address_allowed(ip)


# IANA's special-purpose address registries, where Python's ipaddress tables differ between versions, or
# call an address global that the registry says no one on the internet answers at: each is refused by the
# guard's own list, whatever the interpreter says.
SPECIAL_PURPOSE = [
    "192.0.0.192",  # IETF protocol assignments, 192.0.0.0/24: Python 3.11.7 calls it global
    "192.0.0.9",  # the block's anycast addresses too: no webhook receiver is one
    "192.0.0.255",
    "192.88.99.1",  # 6to4 relay anycast, deprecated: Python 3.11.7 calls it global
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "100.127.255.254",
    "198.18.0.1",  # benchmarking
    "198.19.255.254",
    "255.255.255.255",
    "2001::1",  # IETF protocol assignments, 2001::/23 (Python 3.12.4 made parts of it global)
    "2001:1::1",
    "2001:3::1",
    "2001:4:112::1",
    "2001:20::1",
    "2001:1ff:ffff::1",
    "2001:2::1",  # benchmarking
    "64:ff9b:1::808:808",  # NAT64 for local use (RFC 8215), even of a public IPv4 address
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::c000:c0",  # NAT64 of 192.0.0.192
    "::ffff:192.0.0.192",  # IPv4-mapped
    "::192.0.0.192",  # IPv4-compatible, deprecated
    "2002:c000:c0::1",  # 6to4 of 192.0.0.192: Python 3.11.7 calls it global
    "100::1",  # discard-only
    "5f00::1",  # SRv6 SIDs (2024)
]


@pytest.mark.parametrize("ip", SPECIAL_PURPOSE)
def test_a_special_purpose_address_is_refused_whatever_the_interpreter_says(ip: str) -> None:
    assert not address_allowed(ip)


def test_a_name_resolving_into_the_protocol_assignments_block_is_refused_at_registration() -> None:
    resolve = dns({"protocol.example": ["192.0.0.192"]})
    assert refusal("https://protocol.example/h", resolve=resolve) == "webhook_url_private_address"
    assert refusal("https://192.0.0.192/h") == "webhook_url_private_address"


@pytest.mark.parametrize(
    "ip", ["192.31.196.1", "192.52.193.1", "192.175.48.1", "2620:4f:8000::1", "2001:4860:4860::8888"]
)
def test_addresses_the_registry_calls_globally_reachable_beside_those_blocks_are_allowed(ip: str) -> None:
    assert address_allowed(ip)  # AS112, AMT, and public unicast just past 2001::/23


def test_a_registration_whose_lookup_outlasts_its_deadline_is_refused_before_the_resolver_answers() -> None:
    answered = threading.Event()

    def stuck(host: str, port: int) -> list[str]:
        answered.wait(30)  # released by the test, once the refusal is in hand
        return [PUBLIC]

    try:
        with pytest.raises(UrlRefused) as refused:
            check_url("https://slow.example/h", local_http=False, resolve=stuck, lookup_seconds=0.05)
        # The refusal came while the resolver was still waiting: the deadline ended it, not the answer.
        assert not answered.is_set()
    finally:
        answered.set()
    assert refused.value.code == "webhook_url_invalid"
    assert "did not resolve within 0.05 s" in str(refused.value)
