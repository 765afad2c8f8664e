"""pandoc's simple, multiline and grid tables (`bindery.engine.pandoc_tables`, `bindery.engine.grid_tables`)
are read as pandoc reads them, and every format sets them so that its own readers find the same table:
compared as parsed tables (rows, cells, alignment, spans, header and foot), never as bytes."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pikepdf
import pytest

from bindery import errors
from bindery.engine import markup
from bindery.engine.pandoc_tables import MAX_TABLE_LINES
from bindery.front_matter import split
from bindery.normalising import normalise
from bindery.table_width import MAX_TABLE_COLUMNS
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import ace, epubcheck, pandoc, pdftotext

# pandoc's manual's examples of each kind (its Tables section), and the edges of each.
SAMPLES = [
    # simple tables: alignment from the header over its dashes; headerless; ended by a blank line
    "  Right     Left     Center     Default\n-------     ------ ----------   -------\n"
    "     12     12        12            12\n    123     123       123          123\n"
    "      1     1          1             1\n\nTable:  Demonstration of simple table syntax.\n",
    "-------     ------ ----------   -------\n     12     12        12             12\n"
    "    123     123       123           123\n      1     1          1              1\n"
    "-------     ------ ----------   -------\n",
    "a    b\n---  ---\n# x  y\n1    2\n\n# After\n",
    "Sub\n-------\n\ntext\n",
    # multiline tables: rows of several lines, a caption after; headerless; never closed (no table)
    "-------------------------------------------------------------\n"
    " Centered   Default           Right Left\n"
    "  Header    Aligned         Aligned Aligned\n"
    "----------- ------- --------------- -------------------------\n"
    "   First    row                12.0 Example of a row that\n"
    "                                    spans multiple lines.\n\n"
    "  Second    row                 5.0 Here's another one. Note\n"
    "                                    the blank line between\n                                    rows.\n"
    "-------------------------------------------------------------\n\n"
    "Table: Here's the caption. It, too, may span\nmultiple lines.\n",
    "----------- ------- --------------- -------------------------\n"
    "   First    row                12.0 Example of a row that\n"
    "                                    spans multiple lines.\n\n"
    "  Second    row                 5.0 Here's another one. Note\n"
    "                                    the blank line between\n                                    rows.\n"
    "----------- ------- --------------- -------------------------\n\n"
    ": Here's a multiline table without a header.\n",
    "-----------\nhead   x\n----  -----\nrow    y\n\nrow2   z\n",
    # a table's last line of dashes ends it, whatever follows: text, a heading, another table
    "-----\na  b\n-----\ntext\n",
    "h   x\n--  --\na   b\n-----\ntext\n",
    "-----\na   b\n\nc   d\n-----\ntext\n",
    "-----\na  b\n-----\n-----\nc  d\n-----\n\n",
    "-----\na  b\n-----\n# x\n",
    # grid tables: blocks in cells, spans across columns and rows, colons, a foot, `+` in a cell's text
    ": Sample grid table.\n\n+---------------+---------------+--------------------+\n"
    "| Fruit         | Price         | Advantages         |\n"
    "+===============+===============+====================+\n"
    "| Bananas       | $1.34         | - built-in wrapper |\n"
    "|               |               | - bright color     |\n"
    "+---------------+---------------+--------------------+\n"
    "| Oranges       | $2.10         | - cures scurvy     |\n"
    "|               |               | - tasty            |\n"
    "+---------------+---------------+--------------------+\n",
    "+---------------------+----------+\n| Property            | Earth    |\n"
    "+=============+=======+==========+\n|             | min   | -89.2 °C |\n"
    "| Temperature +-------+----------+\n| 1961-1990   | mean  | 14 °C    |\n"
    "|             +-------+----------+\n|             | max   | 56.7 °C  |\n"
    "+-------------+-------+----------+\n",
    "+---------------------+-----------------------+\n| Location            | Temperature 1961-1990 |\n"
    "|                     | in degree Celsius     |\n|                     +-------+-------+-------+\n"
    "|                     | min   | mean  | max   |\n+=====================+=======+=======+=======+\n"
    "| Antarctica          | -89.2 | N/A   | 19.8  |\n+---------------------+-------+-------+-------+\n"
    "| Earth               | -89.2 | 14    | 56.7  |\n+---------------------+-------+-------+-------+\n",
    "+---------------+---------------+--------------------+\n"
    "| Right         | Left          | Centered           |\n"
    "+==============:+:==============+:==================:+\n"
    "| Bananas       | $1.34         | built-in wrapper   |\n"
    "+---------------+---------------+--------------------+\n",
    "+--------------:+:--------------+:------------------:+\n"
    "| Right         | Left          | Centered           |\n"
    "+---------------+---------------+--------------------+\n",
    "+---------------+---------------+\n| Fruit         | Price         |\n"
    "+===============+===============+\n"
    "| Bananas       | $1.34         |\n+---------------+---------------+\n"
    "| Oranges       | $2.10         |\n+===============+===============+\n"
    "| Sum           | $3.44         |\n+===============+===============+\n",
    " +-------+-------+\n | Fruit | Price |\n +-------+-------+\n",  # indented: text, to pandoc 3.9
    "+------------------+\n| markdown+emoji   |\n+------------------+\n",
    "+-----------+\n| a ragged\n+-----------+\n",
    "+-----+-----+\n| a   \n+-----+-----+\n",
    "+-----+-----+\n| a   | b   | wider than the top\n+-----+-----+\n",
]

# The examples a book of each kind is built from.
SIMPLE, MULTILINE, GRID_BLOCKS, GRID_SPANS, GRID_FOOT = (SAMPLES[n] for n in (0, 4, 12, 13, 17))


class _Tables(HTMLParser):
    """Each table of a page: its caption's words and its rows, as (section, [(tag, align, colspan,
    rowspan, words)])."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self.section = "tbody"
        self.cell: list[str] | None = None
        self.caption: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self.tables.append({"caption": "", "rows": []})
        elif tag in ("thead", "tbody", "tfoot"):
            self.section = tag
        elif tag == "tr":
            self.tables[-1]["rows"].append((self.section, []))
        elif tag in ("td", "th"):
            align = re.search(r"text-align:\s*(\w+)", found.get("style") or "")
            spans = [found.get("colspan") or "1", found.get("rowspan") or "1"]
            self.cell = [tag, align.group(1) if align else "", *spans, ""]
            self.tables[-1]["rows"][-1][1].append(self.cell)
        elif tag == "caption":
            self.caption = []
        elif tag in ("br", "p", "li", "pre") and self.cell is not None:
            self.cell[4] += " "

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.cell = None
        elif tag == "caption" and self.caption is not None:
            self.tables[-1]["caption"] = _words("".join(self.caption))
            self.caption = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell[4] += data
        if self.caption is not None:
            self.caption.append(data)


def _words(text: str) -> str:
    """Words as every reader gives them: a list item's bullet (a grid cell's, set inline) and quotes' kinds
    left out."""
    return " ".join(text.replace("\u2022", " ").replace("'", "\u2019").split())


def tables_of(page: str) -> list[dict[str, Any]]:
    found = _Tables()
    found.feed(page)
    return [
        {
            "caption": table["caption"],
            "rows": [
                (section, [(*cell[:4], _words(cell[4])) for cell in cells])
                for section, cells in table["rows"]
            ],
        }
        for table in found.tables
    ]


def _ours(manuscript: str) -> list[dict[str, Any]]:
    return tables_of(markup.parser().render(manuscript))


def _pandocs(manuscript: str) -> list[dict[str, Any]]:
    return tables_of(pandoc("-f", "markdown", "-t", "html", text=manuscript))


def test_each_sample_is_read_as_pandoc_reads_it() -> None:
    read = before = 0
    for sample in SAMPLES:
        theirs = _pandocs(sample)
        if sample.startswith(":"):
            # A caption before its table: pandoc's, Bindery's only after one (a line's reading never waits
            # on a table below it, so the cut reads forward as the whole book does: crossrefs._caption).
            before += 1
            assert [t["caption"] for t in theirs] and [t["caption"] for t in _ours(sample)] == [""] * len(
                theirs
            )
            theirs = [{**table, "caption": ""} for table in theirs]
        assert _ours(sample) == theirs, sample
        read += len(theirs)
    assert read == 22  # (a setext heading and an indented grid are none; two tables one after the other)
    assert before == 1


def test_a_sample_read_otherwise_is_told_apart() -> None:
    # The comparison sees alignment, spans and the foot: a grid's foot read as its body is a difference.
    ours = _ours(GRID_FOOT)
    assert [section for section, _ in ours[0]["rows"]] == ["thead", "tbody", "tbody", "tfoot"]
    moved = [{**ours[0], "rows": [("tbody", cells) for _, cells in ours[0]["rows"]]}]
    assert moved != _pandocs(GRID_FOOT)
    spans = [cell[2:4] for _, cells in _ours(GRID_SPANS)[0]["rows"] for cell in cells]
    assert ("2", "1") in spans and ("1", "3") in spans


# pandoc's manual, as the corpus holds it (tests/bench/corpus.py): its tables are the user guide's own.
CORPUS = Path(os.environ.get("BINDERY_CORPUS", Path(__file__).parents[3] / "shared" / "corpus"))


def test_the_manuals_tables_are_read_as_pandoc_reads_them() -> None:
    manual = CORPUS / "pandoc-manual.md"
    if not manual.exists():
        pytest.skip(f"no pandoc manual in {CORPUS} (BINDERY_CORPUS)")
    data = manual.read_bytes()
    head, _ = split(iter(data.splitlines(keepends=True)))
    text = data[len(b"".join(head)) :].decode()  # as the cut hands on a manuscript, past its front matter
    ours, theirs = _ours(text), _pandocs(text)
    assert len(theirs) >= 12 and sum(len(cells) for t in theirs for _, cells in t["rows"]) >= 300
    assert ours == theirs


BOOK = "# Tables\n\nTables of every kind pandoc reads.\n\n" + "\n".join(
    [SIMPLE, MULTILINE, GRID_SPANS, GRID_FOOT, GRID_BLOCKS]
)


def _expected() -> list[dict[str, Any]]:
    return _pandocs(BOOK)


def test_the_html_sets_each_table_as_pandoc_does(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    expected = _expected()
    assert len(expected) == 5
    assert [t["rows"] for t in tables_of(data.decode())] == [t["rows"] for t in expected]


def test_the_epub_sets_each_table_as_pandoc_does_and_passes_epubcheck_and_ace(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    book = zipfile.ZipFile(io.BytesIO(data))
    page = book.read("OEBPS/chapter-000001.xhtml").decode()
    assert [t["rows"] for t in tables_of(page)] == [t["rows"] for t in _expected()]
    (tmp_path / "t.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "t.epub")
    violations, _ = ace(tmp_path / "t.epub", tmp_path / "ace")
    assert violations == []


def _pandoc_tables(ast: dict[str, Any]) -> list[list[list[tuple[str, int, int]]]]:
    """Each table of pandoc's AST: its rows (head, bodies and foot in turn), each cell as (words, rows
    spanned, columns spanned)."""

    def words(node: Any) -> str:
        if isinstance(node, dict):
            if node.get("t") == "Str":
                return str(node["c"])
            if node.get("t") in ("Space", "SoftBreak", "LineBreak"):
                return " "
            return " ".join(words(v) for v in node.values())
        if isinstance(node, list):
            return " ".join(words(v) for v in node)
        return ""

    def rows(of: list[Any]) -> list[list[tuple[str, int, int]]]:
        return [[(_words(words(cell[4])), cell[2], cell[3]) for cell in row[1]] for row in of]

    found: list[list[list[tuple[str, int, int]]]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("t") == "Table":
                _, _, _, head, bodies, foot = node["c"]
                found.append(
                    rows(head[1])
                    + [r for body in bodies for r in rows(body[2]) + rows(body[3])]
                    + rows(foot[1])
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(ast)
    return found


def test_the_docx_holds_each_table_with_its_spans_as_pandoc_reads_it_back(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    (tmp_path / "t.docx").write_bytes(data)
    back = _pandoc_tables(json.loads(pandoc("-f", "docx", "-t", "json", str(tmp_path / "t.docx"))))
    expected = _pandoc_tables(json.loads(pandoc("-f", "markdown", "-t", "json", text=BOOK)))
    assert len(expected) == 5 and (("Property", 1, 2) in expected[2][0])
    assert back == expected


def test_the_pdf_holds_each_cells_words_in_tagged_tables_with_their_spans(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "t.pdf").write_bytes(data)
    text = " ".join(pdftotext(tmp_path / "t.pdf").split())
    expected = _expected()
    for table in expected:
        for _, cells in table["rows"]:
            for cell in cells:
                assert all(word in text for word in cell[4].replace("’", "'").split()), cell
    kinds: dict[str, int] = {}
    spans: list[tuple[str, int]] = []
    with pikepdf.open(tmp_path / "t.pdf") as pdf:
        todo = [pdf.Root.StructTreeRoot]
        while todo:
            node = todo.pop()
            kind = str(node.get("/S", ""))
            kinds[kind] = kinds.get(kind, 0) + 1
            attributes = node.get("/A")
            for found in attributes if isinstance(attributes, pikepdf.Array) else [attributes]:
                if isinstance(found, pikepdf.Dictionary):
                    spans.extend(
                        (name, int(found[name])) for name in ("/ColSpan", "/RowSpan") if name in found
                    )
            kids = node.get("/K")
            for kid in kids if isinstance(kids, pikepdf.Array) else [kids] if kids is not None else []:
                if isinstance(kid, pikepdf.Dictionary):
                    todo.append(kid)
    cells = sum(len(cells) for table in expected for _, cells in table["rows"])
    assert kinds.get("/Table") == 5
    assert kinds.get("/TH", 0) + kinds.get("/TD", 0) == cells
    assert sorted(spans) == [("/ColSpan", 2), ("/RowSpan", 3)]


@pytest.mark.parametrize("kind", ["simple", "grid"])
@pytest.mark.parametrize("columns", [MAX_TABLE_COLUMNS + 1, 10_000])
def test_a_simple_or_grid_table_past_the_bound_is_refused_as_a_pipe_table_is(kind: str, columns: int) -> None:
    # Its line of dashes, or its border, says how many columns it has, as a pipe table's delimiter row does.
    if kind == "simple":
        table = "ab " * columns + "\n" + "-- " * columns + "\n" + "cd " * columns + "\n"
    else:
        table = "+-" * columns + "+\n" + "|a" * columns + "|\n" + "+-" * columns + "+\n"
    with pytest.raises(errors.Unprocessable) as refused:
        normalise(f"# T\n\n{table}".encode())
    assert refused.value.code == "table_too_wide"
    assert refused.value.details == {"line": 4 if kind == "simple" else 3, "columns": columns, "limit": 256}


@pytest.mark.parametrize(
    "line",
    [
        "-- " * MAX_TABLE_COLUMNS,
        "+-" * MAX_TABLE_COLUMNS + "+",
        "> - " + "+==" * MAX_TABLE_COLUMNS + "+",
        "- " * 600,  # (a rule, or a list's marker after another: no run of dashes of a table's)
        "a -- b " * 600,
        "+-" * 300 + "+ and text",
    ],
)
def test_a_table_of_the_bound_and_lines_of_other_shapes_pass(line: str) -> None:
    assert normalise(f"# T\n\n{line}\n".encode()) == f"# T\n\n{line}\n".encode()


@pytest.mark.parametrize(
    "line",
    [
        "-- " * (MAX_TABLE_COLUMNS + 1),
        "> 1. " + "+:-:" * (MAX_TABLE_COLUMNS + 1) + "+",
        "--" + " -" * MAX_TABLE_COLUMNS,
    ],
)
def test_a_line_of_one_column_more_is_refused(line: str) -> None:
    with pytest.raises(errors.Unprocessable) as refused:
        normalise(f"# T\n\n{line}\n".encode())
    assert refused.value.details == {"line": 3, "columns": MAX_TABLE_COLUMNS + 1, "limit": MAX_TABLE_COLUMNS}


def test_a_grid_whose_columns_past_the_bound_come_from_several_lines_is_its_text() -> None:
    # No line has more than the bound's `+`s, so none is refused; the grid of them all is read as its text.
    width = 2 * (MAX_TABLE_COLUMNS + 1)
    bands = ["+" + "-" * (width - 1) + "+"]
    for n in range(1, MAX_TABLE_COLUMNS + 2):
        bands += [
            "|" + " " * (width - 1) + "|",
            "+" + "-" * (2 * n - 1) + "+" + "-" * (width - 2 * n - 1) + "+",
        ]
    grid = "\n".join([*bands[:-1], bands[0]]) + "\n"
    normalise(grid.encode())  # (not refused)
    assert "<table>" not in markup.parser().render(grid)
    narrower = "\n".join([*bands[:40], bands[0]]) + "\n"
    assert "<table>" in markup.parser().render(narrower)


def test_a_grid_table_past_the_bound_goes_on_as_tables_of_every_row() -> None:
    rows = MAX_TABLE_LINES * 3 // 2
    grid = "+------+-----+\n" + "".join(f"| a{n:<4}| b   |\n+------+-----+\n" for n in range(rows))
    tokens = markup.parser().parse(grid)
    assert sum(t.type == "table_open" for t in tokens) == 4
    cells = [t.content for t in tokens if t.type == "inline"]
    assert cells == [word for n in range(rows) for word in (f"a{n}", "b")]  # each row once, no text
