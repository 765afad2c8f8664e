"""Manuscripts shaped to cost their readers the most per byte: the families of hostile input that the cut
and every renderer must read in work linear in their size (issue 46), at least CommonMark's own
pathological tests (commonmark-spec's test/pathological_tests.py) and the shapes found costly in Bindery.

`FAMILIES[name](size)` is a manuscript of about `size` bytes, one chapter ("# T") unless the family is a
shape of the cut's: those are the whole manuscript, as a caller would send them. `PROSE` is the yardstick:
ordinary prose of the same size, with the emphasis and links a book has.
"""

from __future__ import annotations

from collections.abc import Callable

HEAD = "# T\n\n"


def _repeat(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def _chapter(body: str) -> str:
    return HEAD + body + "\n"


def _prose(size: int) -> str:
    sentence = "The quick brown fox jumps over the lazy dog, said *she*, and [left](https://example.org). "
    return _chapter(_repeat(sentence * 5 + "\n\n", size))


def _references(size: int) -> str:
    count = max(1, size // 30)
    uses = "".join(f"[r{n}] " for n in range(count))
    return _chapter(uses + "\n\n" + "".join(f"[r{n}]: /u{n}\n" for n in range(count)))


def _footnotes(size: int) -> str:
    count = max(1, size // 24)
    calls = "".join(f"a[^{n}] " for n in range(count))
    return _chapter(calls + "\n\n" + "".join(f"[^{n}]: note {n}\n\n" for n in range(count)))


def _table(size: int) -> str:
    columns = max(1, size // 6)
    return _chapter("|a" * columns + "|\n" + "|-" * columns + "|\n" + "|b" * columns + "|")


def _wide_rows(size: int) -> str:
    """A table as wide as a table may be (bindery.table_width), of as many rows as fill the size."""
    return _chapter("|a" * 256 + "|\n" + "|-" * 256 + "|\n" + _repeat("|b" * 256 + "|\n", size))


def _images(size: int) -> str:
    return _chapter("".join(f"![figure {n}](img{n}.png)\n\n" for n in range(max(1, size // 24))))


def _dashes(size: int) -> str:
    """Lines of dashes alone, a blank line after each 900: as many as a table may take, each run is one (of
    one row), as pandoc reads it. (A run past MAX_TABLE_LINES is a table of its last lines, the lines before
    them rules, so the family would change its shape between sizes.)"""
    lines = ["-----  -----\n"] * max(1, size // 13)
    return _chapter("".join(line + ("\n" if n % 900 == 899 else "") for n, line in enumerate(lines)))


def _spanned(size: int) -> str:
    """A grid table of 70 columns and many bands of rows, all one cell: its bands are marked by `+`s at its
    walls alone, and each place it covers is a hidden cell. (Within MAX_TABLE_LINES at each size taken.)"""
    row, band = "|" + " " * 139 + "|\n", "+" + " " * 139 + "+\n"
    return _chapter("+-" * 70 + "+\n" + _repeat(row + band, size) + row + "+-" * 70 + "+")


def _half(size: int) -> int:
    return max(1, size // 2)


FAMILIES: dict[str, Callable[[int], str]] = {
    # The cut's (item 1): a heading-like line, setext underline or fence indented inside one list item.
    "indented atx headings in a list item": lambda n: "- x\n" + _repeat("  # a\n", n),
    "indented setext headings in a list item": lambda n: "- x\n" + _repeat("  a\n  =\n", n),
    "indented fences in a list item": lambda n: "- x\n" + _repeat("  ```\n", n),
    # Containers nested deep, and many of them.
    "deeply nested lists": lambda n: _chapter("- " * _half(n) + "a"),
    "deeply nested block quotes": lambda n: _chapter("> " * _half(n) + "a"),
    "nested lists, many": lambda n: _chapter(
        _repeat("".join("  " * i + "- a\n" for i in range(30)) + "\nb\n\n", n)
    ),
    "headings in block quotes": lambda n: _chapter(_repeat("> # a\n", n)),
    # Inline: CommonMark's pathological cases.
    "nested emphasis": lambda n: _chapter("*a **a " * (n // 14) + "b" + " a** a*" * (n // 14)),
    "nested brackets": lambda n: _chapter("[" * _half(n) + "a" + "]" * _half(n)),
    "emphasis closers with no openers": lambda n: _chapter(_repeat("a_ ", n)),
    "emphasis openers with no closers": lambda n: _chapter(_repeat("_a ", n)),
    "link closers with no openers": lambda n: _chapter(_repeat("a]", n)),
    "link openers with no closers": lambda n: _chapter(_repeat("[a", n)),
    "link openers and emphasis closers": lambda n: _chapter(_repeat("[ a_", n)),
    "mismatched openers and closers": lambda n: _chapter(_repeat("*a_ ", n)),
    "unclosed links": lambda n: _chapter(_repeat("[a](<b", n)),
    "unclosed link destinations": lambda n: _chapter(_repeat("[a](b", n)),
    "backtick runs": lambda n: _chapter(_repeat("a`` `", n)),
    "backticks of every length": lambda n: _chapter(
        "".join("e" + "`" * i for i in range(1, int((2 * n) ** 0.5)))
    ),
    # Runs of one character.
    "a run of backticks": lambda n: _chapter("`" * n + "a"),
    "a run of <": lambda n: _chapter("<" * n + "a"),
    "a run of backslashes": lambda n: _chapter("\\" * n + "a"),
    "a run of *": lambda n: _chapter("*" * n + "a"),
    "a run of _": lambda n: _chapter("_" * n + "a"),
    # Many definitions, wide tables, long lines, many images.
    "link reference definitions": _references,
    "footnotes": _footnotes,
    "a table of many columns": _table,  # refused past 256 (table_too_wide), before any build
    "a table of 256 columns, many rows": _wide_rows,
    "a line of the whole size": lambda n: _chapter(_repeat("word ", n).rstrip()),
    "images named": _images,
    "a definition list of many terms": lambda n: _chapter(_repeat("Term\n:   its definition\n", n)),
    "definitions after blank lines": lambda n: _chapter("Term\n\n" + _repeat(":   a definition\n\n", n)),
    "quotes of one kind opened, of the other closed": lambda n: _chapter(_repeat("\"a' ", n)),
    "quotes across emphasis": lambda n: _chapter(_repeat("*\"a* b' -- c... ", n)),
    "superscripts and subscripts never closed": lambda n: _chapter(_repeat("2^10 H~2 ", n)),
    "a line block of many lines": lambda n: _chapter(_repeat("|   a line of verse\n", n)),
    "a task list of many items": lambda n: _chapter(_repeat("- [x] done\n", n)),
    "HTML tags of the subset never closed": lambda n: _chapter(_repeat("<sub>a <kbd>b ", n)),
    "HTML tags closed across emphasis": lambda n: _chapter(_repeat("*a<mark>b* c</mark> ", n)),
    "HTML closers alone": lambda n: _chapter(_repeat("</span></abbr><br> ", n)),
    "div openers never closed": lambda n: _chapter(_repeat("::: note\ntext\n\n", n)),
    "div closers alone": lambda n: _chapter(_repeat(":::\nwords\n", n)),
    "divs nested and closed": lambda n: _chapter(_repeat("::: tip\n", n // 20) + _repeat(":::\n", n // 20)),
    "bare URLs, many": lambda n: _chapter(_repeat("see https://example.com/a_(b)). ", n)),
    "schemes with no address": lambda n: _chapter(_repeat("https:// mailto: ", n)),
    "a bare URL ending in parentheses": lambda n: _chapter("see https://a.b/x" + _repeat(")", n)),
    "spans with ids, many": lambda n: _chapter(_repeat("[a span]{#s .smallcaps} words ", n)),
    "spans nested deep": lambda n: _chapter(_repeat("[", n // 8) + "a" + _repeat("]{.x}", n // 8)),
    "span attributes never closed": lambda n: _chapter(_repeat("[a]{.b .c #d k=v ", n)),
    "fancy list markers, many": lambda n: _chapter(_repeat("(iv) item\n", n)),
    "fancy markers that end each list": lambda n: _chapter(
        _repeat("a. one\ni. two\n(b) three\n#. four\n", n)
    ),
    "fancy lists nested deep": lambda n: _chapter("(a) " * _half(n) + "x"),
    "roman numerals past reason": lambda n: _chapter(_repeat("mmmmcmxcix) x\n", n)),
    "dollars never closed": lambda n: _chapter(_repeat("$a ", n)),
    "display dollars never closed": lambda n: _chapter(_repeat("$$a ", n)),
    "formulas, each its own": lambda n: _chapter("".join(f"$x_{{{i}}}^2$ " for i in range(n // 10))),
    "a formula nested deep": lambda n: _chapter("$" + "{" * _half(n) + "x" + "}" * _half(n) + "$"),
    "escaped dollars in a formula never closed": lambda n: _chapter("$a" + _repeat("\\$ ", n)),
    # Code highlighted (bindery.engine.highlighting): Pygments' lexers read each block that names a language.
    "code blocks with a language, many": lambda n: _chapter(
        _repeat("```python\nx = f(1, 'a')  # c\n```\n\n", n)
    ),
    "a code block with a language, huge": lambda n: _chapter(
        "```python\n" + _repeat("def f(x, *a): return x + 'b' * 2  # c\n", n) + "```"
    ),
    "a code block of a token a character": lambda n: _chapter(
        "```python\n" + _repeat("([{'\\" * 20 + "\n", n) + "```"
    ),
    "a language of hostile characters": lambda n: _chapter(
        _repeat("```\"><b a='&amp;\\{.x}\nx = 1\n```\n", n)
    ),
    "languages, each its own name": lambda n: _chapter(
        "".join(f"```lang{i}\nx = 1\n```\n" for i in range(n // 22))
    ),
    "a language name of the whole size": lambda n: _chapter("```" + _repeat("c<\"&'>", n) + "\nx = 1\n```"),
    # pandoc's simple, multiline and grid tables (bindery.engine.pandoc_tables): each bounded to
    # MAX_TABLE_LINES lines, so the larger sizes of a family of many rows read past the bound, as text.
    "a simple table of many rows": lambda n: _chapter("a    b\n---  ---\n" + _repeat("1    2\n", n)),
    "a simple table of many columns": lambda n: _chapter(  # refused past 256 (table_too_wide)
        "ab " * (n // 9) + "\n" + "-- " * (n // 9) + "\n" + "cd " * (n // 9) + "\n"
    ),
    "simple tables, many": lambda n: _chapter(_repeat("a    b\n---  ---\n1    2\n3    4\n\n", n)),
    "a multiline table of many rows": lambda n: _chapter(
        "-------------\nhead   x\n-----  -----\n" + _repeat("a      b\nc      d\n\n", n) + "-------------\n"
    ),
    "multiline tables, many": lambda n: _chapter(
        _repeat("-----------\nh    x\n----  ----\na    b\nc    d\n\ne    f\n-----------\n\n", n)
    ),
    "multiline tables never closed": lambda n: _chapter(_repeat("-----  -----\na      b\n\n", n)),
    "a headerless table never closed": lambda n: _chapter("-----  -----\n" + _repeat("a      b\n", n)),
    "lines of dashes alone": _dashes,
    "lines of dashes between blank lines": lambda n: _chapter(_repeat("\n-------\n", n)),
    "a grid table of many rows": lambda n: _chapter("+---+---+\n" + _repeat("| a | b |\n+---+---+\n", n)),
    "a grid table of 128 columns, many rows": lambda n: _chapter(  # (rows of 514 bytes: 3 at 2 KB)
        "+-" * 128 + "+\n" + _repeat("|a" * 128 + "|\n" + "+-" * 128 + "+\n", n - 257)
    ),
    "grid tables, many": lambda n: _chapter(
        _repeat("+---+---+\n| a | b |\n+===+===+\n| c | d |\n+---+---+\n\n", n)
    ),
    "a grid table never closed": lambda n: _chapter("+---+---+\n" + _repeat("| a | b |\n", n)),
    "grid tables, ragged": lambda n: _chapter(_repeat("+---+---+\n| a | b\n+---+---+\n\n", n)),
    "grid separator lines alone": lambda n: _chapter(_repeat("+---+---+\n+===+===+\n", n)),
    # (Lines of 141 characters: a table within MAX_TABLE_LINES at each size the tests take.)
    "grid corners everywhere": lambda n: _chapter(
        "+-" * 70 + "+\n" + _repeat("|+" * 70 + "|\n" + "+-" * 70 + "+\n", n)
    ),
    "a grid cell spanning every column and row": _spanned,
    "a grid cell of many blocks": lambda n: _chapter(
        "+----------+\n" + _repeat("| - item   |\n|          |\n| > quote  |\n", n) + "+----------+\n"
    ),
    # The book as one document (issue 47): each link's words are read to warn of it, once.
    "links to nowhere in one paragraph": lambda n: _chapter(_repeat("[m](#missing) words words\n", n)),
    "numbered references to nowhere": lambda n: _chapter(_repeat("See @fig-none and [-@tbl-none].\n", n)),
    "notes cited, defined in another chapter": lambda n: (
        _chapter(_repeat("a[^n] ", n // 2)) + "\n# U\n\n[^n]: the note, defined far away\n"
    ),
}

PROSE: Callable[[int], str] = _prose
