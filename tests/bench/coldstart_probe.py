"""One fresh process's cold start, printed in seconds: a handler's import and its first invoke, which builds
its clients and makes its first AWS calls; or the floor, the same AWS calls made with bare boto3.

    coldstart_probe.py handler <module> <event.json> [<calls.json>]   (with calls.json: record, untimed)
    coldstart_probe.py replay <calls.json>
    coldstart_probe.py none                                           (the process and this preamble alone)
"""

import json
import sys
import time

from bindery_local.context import LambdaContext  # imported before the clock starts: Lambda has its own


def _plain(value: object) -> object:
    """A request parameter as JSON can hold it: a body becomes its length, refilled on replay."""
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": len(value)}
    if hasattr(value, "getbuffer"):
        return {"__bytes__": value.getbuffer().nbytes}
    if hasattr(value, "read"):
        # Measured, then rewound: the recording runs before the call, which still sends these bytes.
        start = value.tell()
        size = len(value.read())
        value.seek(start)
        return {"__bytes__": size}
    raise TypeError(f"cannot record {type(value).__name__}")


def _record(out: str) -> None:
    """Note every call and presigning a handler makes, as (service, operation, params, presigned)."""
    import atexit

    import botocore.client
    import botocore.signers

    calls: list[dict[str, object]] = []
    make_call = botocore.client.BaseClient._make_api_call
    presign = botocore.signers.generate_presigned_url

    def recorded_call(self, operation_name, api_params):  # type: ignore[no-untyped-def]
        service = self.meta.service_model.service_name
        calls.append(
            {
                "service": service,
                "op": operation_name,
                "params": json.loads(json.dumps(api_params, default=_plain)),
            }
        )
        return make_call(self, operation_name, api_params)

    def recorded_presign(self, ClientMethod, Params=None, ExpiresIn=3600, HttpMethod=None):  # type: ignore[no-untyped-def]
        service = self.meta.service_model.service_name
        calls.append({"service": service, "op": ClientMethod, "params": Params, "presign": ExpiresIn})
        return presign(self, ClientMethod, Params, ExpiresIn, HttpMethod)

    botocore.client.BaseClient._make_api_call = recorded_call  # type: ignore[method-assign]
    botocore.signers.generate_presigned_url = recorded_presign

    def write() -> None:
        with open(out, "w") as f:
            json.dump(calls, f)

    atexit.register(write)


def _refill(value: object) -> object:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return b"x" * value["__bytes__"]
        return {k: _refill(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_refill(v) for v in value]
    return value


mode = sys.argv[1]
if mode == "handler":
    with open(sys.argv[3]) as f:
        event = json.load(f)
    if len(sys.argv) > 4:
        _record(sys.argv[4])
    started = time.perf_counter()
    module = __import__(sys.argv[2], fromlist=["handler"])
    module.handler(event, LambdaContext("bindery-coldstart", timeout_ms=30_000))
elif mode == "none":
    started = time.perf_counter()
else:
    with open(sys.argv[2]) as f:
        calls = json.load(f)
    started = time.perf_counter()
    import contextlib

    import boto3
    from botocore import xform_name
    from botocore.exceptions import ClientError

    clients: dict[str, object] = {}
    for call in calls:
        client = clients.get(call["service"]) or clients.setdefault(
            call["service"], boto3.client(call["service"])
        )
        if "presign" in call:
            client.generate_presigned_url(call["op"], Params=call["params"], ExpiresIn=call["presign"])  # type: ignore[attr-defined]
        else:
            # A replayed write may be refused: its round trip is what the floor measures.
            with contextlib.suppress(ClientError):
                getattr(client, xform_name(call["op"]))(**_refill(call["params"]))
print(time.perf_counter() - started)
