"""A batch's one download: a zip of its ready files and a manifest.json, streamed from S3 into S3.

The bundle is an export row of format `bundle`, under its batch's id as its book (`bindery.storage.types`):
the worker claims it, writes it, and finishes it as it does any export, and the GC expires and unlinks it as
it does any export. Memory holds one part of the upload and one chunk of the file being copied, whatever the
number or size of the files; each file's SHA-256 is computed on the way and checked against its row's.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from bindery import engine
from bindery.states import State
from bindery.storage import Export

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class File:
    """One ready target's artifact, as the bundle names it."""

    export: Export

    @property
    def name(self) -> str:
        e = self.export
        fmt = engine.ZIP if e.package == "zip" else engine.FORMATS[e.format]
        return f"{e.book_id}/{e.format}-{e.id}.{fmt.extension}"


class Damaged(Exception):
    """A file's bytes are not the ones its row recorded (its SHA-256 differs): the bundle is not made."""


def ready_files(targets: Iterable[Export], now: float) -> list[File]:
    """The targets whose links are still good, in the batch's order: what the bundle holds."""
    return [
        File(t)
        for t in targets
        if t.state == State.READY and t.path and t.expires_at is not None and t.expires_at > now
    ]


def write_bundle(
    files: list[File], chunks: Callable[[str], Iterator[bytes]], out: io.RawIOBase
) -> list[dict[str, Any]]:
    """Write the zip of `files` to `out`, a stream that cannot seek, and return its manifest's entries.

    Each member is written with a data descriptor (its size and CRC after its bytes), so nothing is held
    back to be patched in; ZIP64 throughout, so no member and no archive has a size limit."""
    entries = []
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for file in files:
            digest, size = hashlib.sha256(), 0
            info = zipfile.ZipInfo(file.name, date_time=(2026, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                for chunk in chunks(file.export.path or ""):
                    member.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            sha256 = digest.hexdigest()
            if file.export.sha256 and file.export.sha256 != sha256:
                raise Damaged(
                    f"{file.name}: its bytes' SHA-256 is {sha256}, its row says {file.export.sha256}"
                )
            entries.append(
                {
                    "name": file.name,
                    "book_id": file.export.book_id,
                    "export_id": file.export.id,
                    "format": file.export.format,
                    "revision": file.export.built_revision,
                    "size_bytes": size,
                    "sha256": sha256,
                }
            )
        manifest = json.dumps({"files": entries}, indent=2, ensure_ascii=False).encode("utf-8")
        archive.writestr(zipfile.ZipInfo(MANIFEST, date_time=(2026, 1, 1, 0, 0, 0)), manifest)
    return entries
