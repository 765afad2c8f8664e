"""Bytes held to be read back in order, as the chunks they were written in: a chunk that is `bytes` is kept
as it is, never copied. (A BytesIO grows by an eighth at a time, copying what it holds at each step: an
html of 1,200 chapters, written a chapter at a time, spent 4-20 ms of a 0.1 s re-export copying itself.)"""

from __future__ import annotations

import bisect
import io
import tempfile
from collections.abc import Iterator
from typing import Any


class Spool(io.RawIOBase):
    """Bytes in memory, written only at the end, read (by botocore, as a request's body: an artifact's
    part) after a seek."""

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[bytes] = []
        self._ends: list[int] = []  # where each chunk ends
        self._size = self._at = 0

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._at != self._size:
            raise io.UnsupportedOperation("a spool is written only at its end")
        chunk = data if type(data) is bytes else bytes(data)
        if chunk:
            self._chunks.append(chunk)
            self._size += len(chunk)
            self._ends.append(self._size)
            self._at = self._size
        return len(chunk)

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = min(max(base + offset, 0), self._size)
        return self._at

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._at + size)
        out: list[bytes] = []
        n = bisect.bisect_right(self._ends, self._at)
        while self._at < end:
            chunk, start = self._chunks[n], self._ends[n] - len(self._chunks[n])
            taken = chunk[self._at - start : end - start]
            out.append(taken)
            self._at += len(taken)
            n += 1
        return out[0] if len(out) == 1 else b"".join(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._chunks, self._ends = [], []
        super().close()


class RollingSpool:
    """Chunks in memory up to `in_memory` bytes; past that, all of it on local disk (as a
    SpooledTemporaryFile rolls over: a 200 MB html's first 8 MiB, held in memory to the end, raised its
    peak RSS by a tenth). Read back in order."""

    def __init__(self, in_memory: int):
        self._memory: list[bytes] = []
        self._held, self._limit = 0, in_memory
        self._disk: Any = None

    def write(self, data: bytes) -> None:
        if self._disk is None and self._held + len(data) <= self._limit:
            self._memory.append(data)
            self._held += len(data)
            return
        if self._disk is None:
            self._disk = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close)
            self._disk.writelines(self._memory)
            self._memory, self._held = [], 0
        self._disk.write(data)

    def chunks(self, size: int) -> Iterator[bytes]:
        """What was written, in order: from memory, each chunk as it was written (let go of as it is handed
        on); or from disk, `size` at a time."""
        memory, self._memory, self._held = self._memory, [], 0
        memory.reverse()
        while memory:
            yield memory.pop()
        if self._disk is not None:
            self._disk.seek(0)
            while chunk := self._disk.read(size):
                yield chunk

    def close(self) -> None:
        self._memory, self._held = [], 0
        if self._disk is not None:
            self._disk.close()
            self._disk = None
