"""The join's numbering and its written pieces (bindery/engine/segments.py, bindery/engine/joined_file.py),
without Typst: the spans, a written piece kept and read back, and the cross-reference rows."""

from __future__ import annotations

import io
import random
from array import array
from pathlib import Path

import pytest

from bindery.engine.joined_file import JoinedFile, Written, _rows
from bindery.engine.pieces import Piece
from bindery.engine.segments import FIRST, GRAIN, Part, pack, spans, unpack


def _piece(size: int, pages: int, keys: int) -> Piece:
    return Piece(Path("p.pdf"), pages, size=size, keys=keys)


def test_a_run_that_grew_a_little_moves_no_later_run_and_one_that_grew_past_its_room_does() -> None:
    book = [_piece(900, 30, 30), _piece(5000, 120, 125), _piece(700, 20, 20)]
    before = spans(book, [0, 1, 2])
    assert before[0].base == FIRST - 1 and before[0].end == before[1].base
    assert [s.keys for s in before.values()] == [0, 256, 512]
    assert all(s.extra + s.keys >= 0 and s.end - s.extra >= s.size // 200 for s in before.values())
    grown = spans([_piece(1000, 34, 34), *book[1:]], [0, 1, 2])  # a page more, its objects and keys
    assert (grown[1], grown[2]) == (before[1], before[2]) and grown[0] != before[0]
    far = spans([_piece(2 * GRAIN, 60, 300), *book[1:]], [0, 1, 2])  # past its room: the rest move
    assert far[1].base > before[1].base and far[1].keys > before[1].keys


def test_spans_follow_the_order_asked_not_the_list() -> None:
    book = [_piece(400, 4, 4), _piece(800, 10, 10)]
    ordered = spans(book, [1, 0])
    assert ordered[1].base == FIRST - 1 and ordered[0].base == ordered[1].end and ordered[0].keys == 256


def test_a_written_piece_reads_back_as_it_was_kept() -> None:
    written = Written(b"1 0 obj\n<< >>\nendobj\n", [(17, 1, 0, 0), (18, 2, 40, 3), (70000, 2, 40, 65535)])
    part = Part([20], [(0, 21), (5, 22)], [("p2 Note 1", 23)], [(b"/Aside", b"/Span")], [(b"/C1", b"<< >>")])
    assert unpack(pack(written, part)) == (written, part)
    empty = Written(b"", [])
    assert unpack(pack(empty, Part())) == (empty, Part())


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:6],  # cut inside its sizes
        lambda data: data[:20],  # cut inside its head
        lambda data: data[: len(data) - 40],  # cut inside its entries
        lambda data: b"%PDF-1.7\n" + data,  # not one at all (a compiled PDF kept under its key, say)
        lambda data: data.replace(b'"kids"', b'"kidz"'),  # a head of another shape
    ],
)
def test_what_is_not_a_written_piece_is_refused_not_used(damage: object) -> None:
    data = pack(Written(b"x" * 10, [(17, 1, 0, 0)] * 8), Part([20], [(0, 21)]))
    with pytest.raises(ValueError, match="not a written piece"):
        unpack(damage(data))  # type: ignore[operator]


def test_a_piece_copied_in_lands_where_it_would_have_been_written() -> None:
    """A piece written apart, then copied into another file at another offset: the same entries, its
    offsets moved by where it now starts."""
    first, second = io.BytesIO(), io.BytesIO()
    alone = JoinedFile(first, 100)
    alone.apart(50, 60)
    alone.put(41, b"<< /A 1 >>")
    alone.put_stream(42, b"<< /Length 3 >>", b"abc")
    written = alone.written()
    assert [n for n, *_ in written.entries] == [42, 41, 50]  # the stream, then the object stream (50)
    assert written.entries[0][2] == 0 and written.data.startswith(b"42 0 obj")
    into = JoinedFile(second, 100)
    into.put_stream(7, b"<< /Length 5 >>", b"hello")  # something before it, so its offsets move
    at = second.tell()
    into.place(written)
    assert into.where[42] == at and into.kind[41] == 2 and into.where[41] == 50 and into.where[50] > at
    assert second.getvalue()[at:] == written.data


def test_a_piece_that_needs_more_numbers_than_its_span_is_refused() -> None:
    book = JoinedFile(io.BytesIO(), 100)
    book.apart(50, 51)
    book.number()
    with pytest.raises(ValueError, match="overran"):
        book.number()


def test_cross_reference_rows_are_the_row_at_a_time_encoding() -> None:
    rng = random.Random(7)
    n = 140_000
    kind = bytearray(rng.choice((0, 1, 2)) for _ in range(n))
    where = array("I", (rng.randrange(2**32) for _ in range(n)))
    index = array("H", (rng.randrange(2**16) for _ in range(n)))
    for start, end in ((0, 65536), (65536, 131072), (131072, 196608)):
        slow = b"".join(
            bytes((k, 0)) + w.to_bytes(4, "big") + i.to_bytes(2, "big")
            for k, w, i in zip(kind[start:end], where[start:end], index[start:end], strict=True)
        )
        assert _rows(kind, where, index, start, end) == slow
