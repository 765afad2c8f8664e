"""The epub's zip writer (bindery/engine/zipped.py): what it writes, zipfile reads back whole, entry by entry,
with each entry's method, date and attributes; a deflated entry made earlier reads as one made now."""

from __future__ import annotations

import io
import zipfile

import pytest

from bindery.engine import zipped
from bindery.engine.zipped import Deflated, TooLarge, ZipWriter

WHEN = (2026, 12, 4, 17, 5, 42)


def _written() -> bytes:
    out = io.BytesIO()
    book = ZipWriter(out, WHEN)
    book.stored("mimetype", b"application/epub+zip", dated=False)
    book.deflated("OEBPS/a.xhtml", Deflated.of(b"<p>a</p>" * 500))
    kept = Deflated.of("<p>é</p>".encode() * 300).kept()  # as a piece keeps it, then read back
    book.deflated("OEBPS/b.xhtml", Deflated.from_kept(kept))
    book.stream_stored("OEBPS/c.png", iter([b"\x89PNG", b"x" * 70_000, b""]))
    book.close()
    return out.getvalue()


def test_zipfile_reads_every_entry_back_as_written() -> None:
    with zipfile.ZipFile(io.BytesIO(_written())) as book:
        assert book.testzip() is None  # every CRC-32 right
        infos = book.infolist()
        assert [i.filename for i in infos] == ["mimetype", "OEBPS/a.xhtml", "OEBPS/b.xhtml", "OEBPS/c.png"]
        assert [i.compress_type for i in infos] == [0, 8, 8, 0]
        assert book.read("mimetype") == b"application/epub+zip"
        assert book.read("OEBPS/a.xhtml") == b"<p>a</p>" * 500
        assert book.read("OEBPS/b.xhtml") == "<p>é</p>".encode() * 300
        assert book.read("OEBPS/c.png") == b"\x89PNG" + b"x" * 70_000
        assert infos[0].date_time == (1980, 1, 1, 0, 0, 0)
        assert {i.date_time for i in infos[1:]} == {(2026, 12, 4, 17, 5, 42)}
        assert infos[1].external_attr == 0o600 << 16 and infos[3].external_attr == 0
        assert infos[1].compress_size < infos[1].file_size // 10


def test_the_mimetype_comes_first_stored_with_no_extra_field_as_ocf_requires() -> None:
    data = _written()
    assert data[:4] == b"PK\x03\x04" and data[8:10] == b"\x00\x00"  # method: stored
    assert data[28:30] == b"\x00\x00" and data[30:38] == b"mimetype"  # no extra field; then its name
    assert data[38:58] == b"application/epub+zip"


def test_a_zip_past_its_limits_is_refused_not_written_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zipped, "LIMIT", 1000)
    book = ZipWriter(io.BytesIO(), WHEN)
    book.stored("mimetype", b"application/epub+zip", dated=False)
    with pytest.raises(TooLarge, match="OEBPS/big"):
        book.stored("OEBPS/big", b"x" * 2000)
