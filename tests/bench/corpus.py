"""Real manuscripts that nobody here wrote, through all five formats, against what pandoc makes of the same
file (issue 47): the internal links pandoc resolves and how many land in each format, epubcheck's errors and
warnings, the words of the manuscript each format has lost, and the warnings the build gave.

    .venv/bin/python -m tests.bench.corpus [FILE...] [--write REPORT.md]

With no FILE, the corpus in $BINDERY_CORPUS (default ../shared/corpus beside the repository; its SOURCES.md
says where each came from). The corpus is not in the repository: a file that is not there is skipped,
and said so. Each book is built in this process, as a build does it: the manuscript normalised and cut
(with its anchors), then each format's renderer. Every manuscript is read by pandoc as pandoc markdown.
"""

from __future__ import annotations

import argparse
import collections
import html.parser
import io
import os
import posixpath
import re
import sys
import tempfile
import time
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bindery.engine import Report, Source, Text, options_for, renderer_for
from bindery.engine.anchors import Anchors
from bindery.manuscript import cut
from bindery.normalising import normalise
from tests.bench.aws import ROOT
from tests.validators import epubcheck, pandoc, pdftotext

CORPUS = Path(os.environ.get("BINDERY_CORPUS", ROOT.parent / "shared" / "corpus"))
MANUSCRIPTS = (
    "pandoc-manual.md",
    "commonmark-spec.md",
    "system-design-primer.md",
    "antic-hay.md",
    "pride-and-prejudice.md",
)
FORMATS = ("markdown", "html", "epub", "docx", "pdf")
SHOWN = 6  # examples of each failure


@dataclass
class Links:
    """A format's internal links: the ids of those that land, and the hrefs of those that land nowhere."""

    landed: collections.Counter[str] = field(default_factory=collections.Counter)
    unlanded: list[str] = field(default_factory=list)


@dataclass
class Row:
    manuscript: str
    words: int
    fmt: str
    resolved: int
    landed: int
    missed_ids: list[str]
    unlanded: list[str]
    missing: collections.Counter[str] = field(default_factory=collections.Counter)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    warned: int = 0  # the warnings in all (a build keeps the first few of each kind)
    seconds: float = 0.0
    epubcheck: tuple[int, int, list[str]] | None = None


class _Page(html.parser.HTMLParser):
    """An html page's ids, and its `<a href>`s (with their attributes) and text outside head, style, nav."""

    HIDDEN = frozenset({"head", "style", "script", "nav"})
    # Tags between which words end; any other (em, code, a, sup, span) may sit inside a word (`id`s).
    BREAKS = frozenset(
        {"address", "article", "aside", "blockquote", "br", "caption", "dd", "div", "dl", "dt", "figcaption"}
        | {"figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "img", "li", "ol", "p"}
        | {"pre", "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
    )

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self._hidden = 0
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        said = {k: v or "" for k, v in attrs}
        if "id" in said:
            self.ids.add(said["id"])
        if tag == "a" and "href" in said and not self._hidden:  # (a nav's are the book's, not the author's)
            self.links.append((said["href"], said))
        self._hidden += tag in self.HIDDEN
        if tag in self.BREAKS:
            self.text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in self.HIDDEN and self._hidden > 0
        if tag in self.BREAKS:
            self.text.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.text.append(data)


def words(text: str) -> collections.Counter[str]:
    """A text's words, each as often as it is there: compatibility forms folded (a ligature is its letters),
    combining marks left out (a pdf's text may give an Arabic word's vowels in another order), case folded,
    and a word a run of letters or of digits (punctuation a break between words, and a note's number set
    against the word it follows, `1The`, not a word of its own)."""
    folded = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Mn")
    return collections.Counter(re.findall(r"[^\W\d_]+|\d+", folded.casefold()))


# Raw html inline (`a<br/>b`) is a break between words, not nothing as pandoc's plain writer has it.
_RAW_HTML_IS_A_BREAK = 'function RawInline(raw) if raw.format == "html" then return pandoc.Space() end end'


def plain_words(markdown: str) -> collections.Counter[str]:
    """The words of pandoc's plain text of a markdown text, less what each format numbers its own way: its
    notes' `[1]` markers and its ordered lists' `4.`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(_RAW_HTML_IS_A_BREAK)
        lua.flush()
        plain = pandoc(
            "-f", "markdown", "-t", "plain", "--wrap=none", "--lua-filter", lua.name, text=markdown
        )
    return words(re.sub(r"^\s*\d+[.)] |\[\d+\]", " ", plain, flags=re.M))


def pandoc_resolved(manuscript: str) -> collections.Counter[str]:
    """The ids of the internal links pandoc's html of the manuscript resolves (an element has the id), each
    as often as a link names it. Not its own machinery: its notes' links (each format numbers notes its own
    way) and a highlighted code line's link to itself."""
    page = _Page(pandoc("-f", "markdown", "-t", "html", "--wrap=none", text=manuscript))
    return collections.Counter(
        unquote(href[1:])
        for href, said in page.links
        if href.startswith("#")
        and unquote(href[1:]) in page.ids
        and "footnote-" not in said.get("class", "")
        and said.get("aria-hidden") != "true"
    )


def html_links(pages: dict[str, str]) -> Links:
    """Links among html pages ({name: page}): `#id` lands if its page has the id, `other#id` if that page
    does (a name relative to the page's folder). A link to another site is none of these."""
    read = {name: _Page(page) for name, page in pages.items()}
    links = Links()
    for name, page in read.items():
        for href, _ in page.links:
            if "#" not in href or re.match(r"[a-z][a-z0-9+.-]*:", href, re.I):
                continue
            file, _, anchor = href.partition("#")
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), file)) if file else name
            if target in read and unquote(anchor) in read[target].ids:
                links.landed[unquote(anchor)] += 1
            else:
                links.unlanded.append(f"{name}: {href}")
    return links


def epub_pages(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        return {n: package.read(n).decode() for n in package.namelist() if n.endswith((".xhtml", ".html"))}


def docx_links(data: bytes) -> Links:
    """A hyperlink to an anchor lands if a bookmark of that name is in the body or the notes."""
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        xml = "".join(
            package.read(n).decode()
            for n in ("word/document.xml", "word/footnotes.xml")
            if n in package.namelist()
        )
    marks = {html.unescape(m) for m in re.findall(r'<w:bookmarkStart [^>]*w:name="([^"]*)"', xml)}
    links, end, before = Links(), -1, ""
    for link in re.finditer(r'<w:hyperlink [^>]*w:anchor="([^"]*)"[^>]*>.*?</w:hyperlink>', xml, re.S):
        anchor = html.unescape(link[1])
        if link.start() == end and anchor == before:
            end = link.end()
            continue  # the same link, its next run styled otherwise (`code` within it)
        end, before = link.end(), anchor
        if anchor in marks:
            links.landed[anchor] += 1
        else:
            links.unlanded.append(f"w:anchor={anchor}")
    return links


def pdf_links(data: bytes) -> Links:
    """A link annotation lands if it goes to a named destination that the document's /Dests has (its name
    tree, or the catalogue's older dictionary). One to a place on a page (an explicit [page ...] array, as a
    note's number has) names no id, and is not counted; nor are the front matter's (the contents, before the
    page labelled 1, 2, 3): they are the book's links, not the author's."""
    import pikepdf

    with pikepdf.open(io.BytesIO(data)) as pdf:
        names: set[str] = set()

        def walk(node: Any) -> None:
            pairs = list(node.get("/Names", []))
            names.update(str(pairs[i]) for i in range(0, len(pairs), 2))
            for kid in node.get("/Kids", []):
                walk(kid)

        if "/Names" in pdf.Root and "/Dests" in pdf.Root.Names:
            walk(pdf.Root.Names.Dests)
        if "/Dests" in pdf.Root:
            names.update(str(k)[1:] for k in pdf.Root.Dests)
        links, pages = Links(), {page.objgen for page in pdf.pages}
        labels = list(pdf.Root.PageLabels.Nums) if "/PageLabels" in pdf.Root else []
        body = next((int(labels[i]) for i in range(0, len(labels), 2) if labels[i + 1].get("/S") == "/D"), 0)
        for n, page in enumerate(pdf.pages[body:], start=body + 1):
            for annot in page.obj.get("/Annots", []):
                if annot.get("/Subtype") != pikepdf.Name.Link:
                    continue
                action = annot.get("/A")
                if action is not None and action.get("/S") != pikepdf.Name.GoTo:
                    continue  # a URI: another site
                dest = annot.get("/Dest") if action is None else action.get("/D")
                if isinstance(dest, pikepdf.Array) and len(dest) and dest[0].objgen in pages:
                    continue  # to a place on a page of its own (a note's number, and back): it names no id
                name = str(dest)[1:] if isinstance(dest, pikepdf.Name) else str(dest)
                if isinstance(dest, pikepdf.Name | pikepdf.String) and name in names:
                    links.landed[name] += 1
                else:
                    links.unlanded.append(f"page {n}: {name[:80]}")
    return links


def markdown_files(data: bytes) -> dict[str, str]:
    """The markdown export's files: the manuscript alone, or the .md files of its zip."""
    if not data.startswith(b"PK"):
        return {"manuscript.md": data.decode()}
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        return {n: package.read(n).decode() for n in package.namelist() if n.endswith(".md")}


def markdown_links(data: bytes) -> Links:
    """Each file's links as pandoc reads them (`#id`, `file.md#id`, implicit header references), landing on
    an id pandoc gives in that file."""
    files = markdown_files(data)
    pages = {
        name: pandoc("-f", "markdown", "-t", "html", "--wrap=none", text=text) for name, text in files.items()
    }
    return html_links(pages)


def format_words(fmt: str, data: bytes, tmp: Path) -> collections.Counter[str]:
    """The words a reader of the format finds."""
    if fmt == "markdown":
        return sum((plain_words(text) for text in markdown_files(data).values()), collections.Counter())
    return words(_text(fmt, data, tmp))


def _text(fmt: str, data: bytes, tmp: Path) -> str:
    if fmt in ("html", "epub"):
        pages = epub_pages(data) if fmt == "epub" else {"": data.decode()}
        return " ".join("".join(_Page(p).text) for p in pages.values())
    path = tmp / f"book.{fmt}"
    path.write_bytes(data)
    if fmt == "docx":  # (as pandoc reads it: a word split across runs is one word)
        return pandoc("-f", "docx", "-t", "plain", "--wrap=none", str(path))
    # A word the typesetter hyphenated at a line's end is one word: pdftotext gives its break as a soft hyphen
    return re.sub("\u00ad\\s*", "", pdftotext(path, "-raw"))


def checked(data: bytes, tmp: Path) -> tuple[int, int, list[str]]:
    path = tmp / "book.epub"
    path.write_bytes(data)
    return epubcheck_counts(epubcheck(path))


def epubcheck_counts(report: str) -> tuple[int, int, list[str]]:
    """epubcheck's errors (fatals counted with them), warnings, and each message: its code, where in the
    book, and what."""
    messages = re.findall(r"^(?:FATAL|ERROR|WARNING)\(([A-Z]+-\d+)\): (?:.*?\.epub/)?(.*)$", report, re.M)
    counts = re.search(r"(\d+) fatals? / (\d+) errors? / (\d+) warnings?", report)
    if counts is None:
        raise RuntimeError(f"epubcheck did not give its counts: {report[-1000:]}")
    fatals, errors, warned = (int(n) for n in counts.groups())
    return fatals + errors, warned, [f"{code} {text}" for code, text in messages]


def build(manuscript: str, title: str, fmt: str) -> tuple[bytes, Report, float]:
    """One format of the book, built as a build does: the manuscript normalised and cut, with its anchors
    (what the upload does), then the format's renderer given its chapters (what a build does, timed)."""
    data = normalise(manuscript.encode())
    anchors = Anchors()
    sections = list(cut(data.splitlines(keepends=True), anchors))
    texts = [
        Text(n, s.title, data[s.offset : s.offset + s.length].decode())
        for n, s in enumerate(sections, start=1)
    ]
    titles = tuple(s.title for s in sections)
    source = Source(
        "corpus0123456789abcd", title, 1, titles, 1.8e9, options=options_for(fmt, None), anchors=anchors
    )
    out = io.BytesIO()
    started = time.perf_counter()
    report = renderer_for(fmt).render(source, texts, out)
    return out.getvalue(), report, time.perf_counter() - started


def links_of(fmt: str, data: bytes) -> Links:
    if fmt == "html":
        return html_links({"book.html": data.decode()})
    if fmt == "epub":
        return html_links(epub_pages(data))
    return {"docx": docx_links, "pdf": pdf_links, "markdown": markdown_links}[fmt](data)


def measure(path: Path, formats: tuple[str, ...] = FORMATS) -> list[Row]:
    manuscript = path.read_text()
    resolved = pandoc_resolved(manuscript)
    reference = plain_words(manuscript)  # what every format is held to
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            data, report, seconds = build(manuscript, path.stem, fmt)
            links = links_of(fmt, data)
            landed = sum(min(n, links.landed[i]) for i, n in resolved.items())
            missed = [f"{i} {links.landed[i]}/{n}" for i, n in resolved.items() if links.landed[i] < n]
            row = Row(path.name, reference.total(), fmt, resolved.total(), landed, missed, links.unlanded)
            row.missing = reference - format_words(fmt, data, Path(tmp))
            notes = report.notes
            row.warnings = [
                *notes.warnings,
                *({"code": "image_missing", **m} for m in notes.missing),
                *({"code": "chapter_skipped", **s} for s in report.skipped),
            ]
            row.warned = notes.warnings_total + notes.missing_total + len(report.skipped)
            row.seconds = seconds
            row.epubcheck = checked(data, Path(tmp)) if fmt == "epub" else None
            rows.append(row)
            print(f"  {path.name} {fmt}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| manuscript | words | format | links landed/pandoc-resolved | epubcheck E/W | words missing "
        "| build warnings | build seconds |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        check = f"{r.epubcheck[0]}/{r.epubcheck[1]}" if r.epubcheck else "–"
        lines.append(
            f"| {r.manuscript} | {r.words:,} | {r.fmt} | {r.landed}/{r.resolved} | {check} "
            f"| {r.missing.total():,} | {r.warned} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def failures(rows: list[Row]) -> str:
    """What went wrong in each row, with the first few examples of each kind."""
    out = []
    for r in rows:
        said = []
        if r.missed_ids:
            said.append(
                f"- {len(r.missed_ids)} ids pandoc links to are not landed on: {_first(r.missed_ids)}"
            )
        if r.unlanded:
            said.append(f"- {len(r.unlanded)} links land nowhere: {_first(r.unlanded)}")
        if r.epubcheck and r.epubcheck[2]:
            codes = collections.Counter(m.split(" ", 1)[0] for m in r.epubcheck[2])
            firsts = {m.split(" ", 1)[0]: m for m in reversed(r.epubcheck[2])}
            said += [f"- epubcheck {code} ×{n}: {firsts[code][:200]}" for code, n in codes.items()]
        if r.missing:
            shown = ", ".join(f"{w}×{n}" for w, n in list(r.missing.items())[:12])
            said.append(f"- {r.missing.total()} words missing ({len(r.missing)} distinct): {shown}")
        if r.warnings:
            codes = collections.Counter(str(w["code"]) for w in r.warnings)
            said.append(f"- build warnings: {dict(codes)}; first: {_first([str(w) for w in r.warnings], 2)}")
        if said:
            out.append(f"**{r.manuscript}, {r.fmt}**\n" + "\n".join(said))
    return "\n\n".join(out)


def _first(items: list[str], n: int = SHOWN) -> str:
    return ", ".join(f"`{i[:120]}`" for i in items[:n]) + (" …" if len(items) > n else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.corpus", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "files", nargs="*", type=Path, help=f"manuscripts (default: {', '.join(MANUSCRIPTS)})"
    )
    parser.add_argument("--write", type=Path, help="write the table and its failures to this file too")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated (default: all five)")
    args = parser.parse_args(argv)
    formats = tuple(args.formats.split(","))
    if not set(formats) <= set(FORMATS):
        parser.error(f"--formats: {', '.join(sorted(set(formats) - set(FORMATS)))}: not one of {FORMATS}")
    rows: list[Row] = []
    for path in args.files or [CORPUS / name for name in MANUSCRIPTS]:
        if not path.is_file():
            print(
                f"skipped {path}: not there (the corpus is not in the repository; see SOURCES.md)",
                file=sys.stderr,
            )
            continue
        rows += measure(path, formats)
    report = f"{table(rows)}\n\n{failures(rows)}\n"
    print(report)
    if args.write:
        args.write.write_text(report)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
