"""An upload's lines as `Objects.lines` streams them: the lines a whole-text split makes, at a cost that
grows with the bytes read, however long a line is."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindery.config import Settings
from bindery.objects import Objects


class _Body:
    """An object's body handing out chunks made beforehand, so a read allocates nothing. At each read it
    adds up how far traced memory rose, since the read before, above where it stood then: what the line
    reader allocated in between, which is at least what it copied."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = iter(chunks)
        self.allocated = 0
        self.level: int | None = None

    def settle(self) -> None:
        current, peak = tracemalloc.get_traced_memory()
        if self.level is not None:
            self.allocated += peak - self.level
        tracemalloc.reset_peak()
        self.level = current

    def read(self, size: int) -> bytes:
        self.settle()
        return next(self.chunks, b"")


def _reader(body: _Body) -> Objects:
    class Served(Objects):
        def open(self, key: str) -> _Body:
            return body

    return Served(Settings())


def _lengths(lines: Iterator[bytes]) -> list[int]:
    return [len(line) for line in lines]  # no line is held, only its length


@pytest.mark.parametrize("piece", [1024, 4096])
def test_a_line_with_no_line_break_is_copied_once_not_once_per_read(piece: int) -> None:
    # Given a 1 MiB upload with no line break at all, read in small pieces: a reader that joins what it
    # holds to each new piece copies the line once per read (512 MiB in 1 KiB pieces, quadratic);
    line = b"x" * (1024 * 1024)
    body = _Body([line[i : i + piece] for i in range(0, len(line), piece)])
    tracemalloc.start()
    try:
        # When its lines are read,
        lengths = _lengths(_reader(body).lines("k"))
        body.settle()  # what the last join allocated, after the last read
    finally:
        tracemalloc.stop()
    # Then there is the one line, and the work is a small multiple of its bytes.
    assert lengths == [len(line)]
    assert body.allocated <= 2 * len(line), f"{body.allocated:,} bytes allocated for {len(line):,}"


def test_short_lines_after_a_long_one_are_each_copied_once() -> None:
    data = b"y" * 300_000 + b"\r\n" + b"a line of prose\n" * 20_000 + b"z" * 300_000
    body = _Body([data[i : i + 1000] for i in range(0, len(data), 1000)])
    tracemalloc.start()
    try:
        lengths = _lengths(_reader(body).lines("k"))
        body.settle()
    finally:
        tracemalloc.stop()
    assert lengths == [len(line) for line in data.splitlines(keepends=True)]
    assert body.allocated <= 3 * len(data), f"{body.allocated:,} bytes allocated for {len(data):,}"


class _Pieces:
    def __init__(self, data: bytes, cuts: list[int]) -> None:
        self.data, self.cuts, self.at = data, iter(cuts), 0

    def read(self, size: int) -> bytes:
        step = next(self.cuts, size)
        piece = self.data[self.at : self.at + step]
        self.at += len(piece)
        return piece


@settings(max_examples=400, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"\r", b"\n", b"\r\n", b"bc"]), max_size=40).map(b"".join),
    cuts=st.lists(st.integers(1, 5), max_size=40),
)
def test_lines_end_where_a_whole_text_split_ends_them_wherever_the_reads_cut(
    data: bytes, cuts: list[int]
) -> None:
    # A read may end between a CR and its LF, after a lone CR, or inside a line: the lines are the same.
    pieces = _Pieces(data, cuts)

    class Served(Objects):
        def open(self, key: str) -> _Pieces:
            return pieces

    assert list(Served(Settings()).lines("k")) == data.splitlines(keepends=True)
