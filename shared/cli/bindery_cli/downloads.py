"""A download's local half: where it is written until it is whole (`part_path`), the writing, and the
SHA-256 check before it takes its name. A local failure is `LocalFileError`, naming the path and the
system's reason, never mistaken for the network's."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from urllib3.exceptions import HTTPError as TransportError

from bindery_cli.answers import ApiError, LocalFileError


def part_path(out: Path, sha256: str | None) -> Path:
    """Where a download to `out` is written until it is complete and checked: named after its SHA-256,
    so that a `.part` of another build is never resumed as this file's."""
    return out.with_name(f"{out.name}.{sha256[:12]}.part" if sha256 else f"{out.name}.part")


def stream_to(
    answer: Any,
    partial: Path,
    done: int,
    total: int | None,
    on_bytes: Callable[[int, int | None], None] | None,
) -> int:
    """The answer's body appended to `partial` from `done`: a local failure is LocalFileError (the
    half-written `.part` removed), the connection's a ConnectionError."""
    try:
        sink = partial.open("ab" if done else "wb")
    except OSError as exc:
        raise LocalFileError(partial, exc.strerror or str(exc)) from None
    with sink:
        try:
            for chunk in answer.stream(256 * 1024):
                try:
                    sink.write(chunk)
                except OSError as exc:
                    sink.close()
                    partial.unlink(missing_ok=True)
                    raise LocalFileError(partial, exc.strerror or str(exc)) from None
                done += len(chunk)
                if on_bytes is not None:
                    on_bytes(done, total)
        except TransportError as exc:
            raise ConnectionError(f"the download was cut off at {done:,} bytes: {exc}") from None
    return done


def keep_checked(partial: Path, out: Path, sha256: str | None) -> None:
    """`partial` checked against `sha256` (a mismatch is ApiError("checksum_mismatch"), nothing kept),
    then renamed to `out`."""
    try:
        if sha256 is not None:
            digest = hashlib.sha256()
            with partial.open("rb") as written:
                while piece := written.read(1024 * 1024):
                    digest.update(piece)
            if digest.hexdigest() != sha256:
                partial.unlink()
                raise ApiError(0, "checksum_mismatch", f"the download's SHA-256 is not {sha256}: not kept")
        partial.replace(out)
    except OSError as exc:
        raise LocalFileError(out, exc.strerror or str(exc)) from None
