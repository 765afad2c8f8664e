"""Each level-1 section of a manuscript, as Bindery's html and pandoc's html structure it: the elements of
each (paragraphs, quotes, lists and their items, emphasis, links, math, ...) counted in both, and where
they differ (issue 48's table for pandoc's test document).

    .venv/bin/python -m tests.bench.sections FILE [--write REPORT.md]

The book is built in this process, as tests/bench/corpus.py builds it. pandoc reads the file as pandoc
markdown (`-s` off: its body alone). Notes are compared apart (pandoc sets them at the document's end,
Bindery at each chapter's), and so are the few elements only one of the two writes around the text: the
title and contents, a figure's wrapper, a note's back-links.
"""

from __future__ import annotations

import argparse
import collections
import html.parser
import re
import sys
from pathlib import Path

from tests.bench.corpus import build
from tests.validators import pandoc

# The elements compared: what a reader sees as the text's structure.
ELEMENTS = [
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "blockquote",
    "pre",
    "ol",
    "ul",
    "li",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "th",
    "td",
    "hr",
    "br",
    "em",
    "strong",
    "del",
    "sup",
    "sub",
    "code",
    "a",
    "img",
    "math",
    "kbd",
    "mark",
    "small",
    "abbr",
]
_NOTES = re.compile(r'<section[^>]*class="footnotes[^"]*"[^>]*>.*?</section>', re.S)


class _Counter(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        tag = "del" if tag == "s" else tag  # (strikeout: markdown-it's `s`, pandoc's `del`)
        if given.get("role") == "doc-backlink" or given.get("class") in ("footnote-backref", "footnotes-sep"):
            return  # a note's way back, and the rule above the notes: apart from the text's structure
        if tag in ELEMENTS:
            self.counts[tag] += 1


def _counted(fragment: str) -> collections.Counter[str]:
    counter = _Counter()
    counter.feed(fragment)
    return counter.counts


def _notes(fragment: str) -> tuple[str, str]:
    """(the fragment without its notes, the notes)."""
    notes = "".join(_NOTES.findall(fragment))
    return _NOTES.sub("", fragment), notes


def sections(path: Path) -> list[tuple[str, collections.Counter[str], collections.Counter[str]]]:
    """(each section's title, pandoc's counts, Bindery's counts), and the notes' last."""
    text = path.read_text()
    ours_html = build(text, path.stem, "html")[0].decode()
    theirs_html = pandoc("-f", "markdown", "-t", "html", "--mathml", str(path))  # (its math as MathML too)
    ours_body, ours_notes = _notes(ours_html)
    theirs_body, theirs_notes = _notes(theirs_html)
    ours = re.split(r'<section class="chapter"[^>]*>', ours_body)[1:]
    theirs = re.split(r"(?=<h1[ >])", theirs_body)
    if not (
        ours and "<h1" not in ours[0]
    ):  # no opening of Bindery's: pandoc's text before the first h1 is none
        theirs.pop(0)
    rows = []
    for mine, pandocs in zip(ours, theirs, strict=False):
        heading = re.search(r"<h1[^>]*>(.*?)</h1>", mine, re.S)
        title = (
            re.sub(r"<[^>]+>", "", heading[1]).strip()
            if heading
            else "(the opening, before the first heading)"
        )
        rows.append((title, _counted(pandocs), _counted(mine)))
    if len(ours) != len(theirs):
        rows.append(
            (
                f"(sections: pandoc {len(theirs)}, Bindery {len(ours)})",
                collections.Counter(),
                collections.Counter(),
            )
        )
    noted = [_counted(notes) for notes in (theirs_notes, ours_notes)]
    for counts in noted:
        counts.pop("hr", None)  # (the rule above the notes: pandoc sets it inside their section)
    rows.append(("Footnotes (their text)", *noted))
    return rows


def report(path: Path) -> str:
    lines = [
        f"Sections of `{path.name}`: the elements of each, pandoc's html beside Bindery's.",
        "",
        "| section | elements (pandoc) | same in Bindery | differs (pandoc → Bindery) |",
        "|---|---:|---|---|",
    ]
    for title, theirs, ours in sections(path):
        differs = [f"{tag} {theirs[tag]}→{ours[tag]}" for tag in ELEMENTS if theirs[tag] != ours[tag]]
        same = "yes" if not differs else "no"
        lines.append(f"| {title} | {sum(theirs.values())} | {same} | {', '.join(differs)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args(argv)
    written = report(args.file)
    if args.write:
        args.write.write_text(written)
    sys.stdout.write(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
