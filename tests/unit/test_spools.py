"""The spools an artifact's part and the html's chapters wait in: what is read back is what was written."""

from __future__ import annotations

import io
import os

import pytest

from bindery.spools import RollingSpool, Spool


def test_a_spool_reads_back_what_was_written_in_any_sizes_and_keeps_bytes_chunks_uncopied() -> None:
    chunks = [os.urandom(n) for n in (5, 0, 100, 7, 4096)]
    spool = Spool()
    for chunk in chunks:
        spool.write(chunk)
    spool.write(bytearray(b"xyz"))
    spool.write(memoryview(b"abcdef")[1:4])
    whole = b"".join(chunks) + b"xyz" + b"bcd"
    assert spool.tell() == len(whole)
    for step in (1, 3, 64, 5000):
        spool.seek(0)
        read = b""
        while chunk := spool.read(step):
            read += chunk
        assert read == whole, step
    assert spool.seek(0, io.SEEK_END) == len(whole)  # botocore's way to its length
    spool.seek(10)
    assert spool.read(7) == whole[10:17]
    buffer = bytearray(9)
    spool.seek(2)
    assert spool.readinto(buffer) == 9 and bytes(buffer) == whole[2:11]
    spool.seek(0)
    assert spool.read(len(chunks[0])) is chunks[0]  # a chunk read whole is the very object written
    with pytest.raises(io.UnsupportedOperation):
        spool.write(b"only at the end")


def test_a_rolling_spool_keeps_chunks_in_memory_up_to_its_size_and_past_it_all_on_disk_in_order() -> None:
    held = [b"abcd", b"efgh"]
    spool = RollingSpool(10)
    for chunk in held:
        spool.write(chunk)
    assert [c is h for c, h in zip(spool.chunks(3), held, strict=True)] == [True, True]  # as written
    spool = RollingSpool(10)
    for chunk in (b"abcd", b"efgh", b"ijkl", b"mnop"):  # past 10 bytes at the third: all on disk
        spool.write(chunk)
    got = list(spool.chunks(3))
    assert b"".join(got) == b"abcdefghijklmnop" and all(len(c) <= 3 for c in got)  # `size` at a time
    spool.close()
    assert list(spool.chunks(3)) == []
