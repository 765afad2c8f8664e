"""No link breaks the epub: random books with links of every kind, good and bad (to headings by id, explicit
or pandoc's, in any chapter; to ids nobody has; to files; outside the book; by a heading's words; by a label
defined in another chapter; notes defined elsewhere; numbered references, some to nothing), each cut and
built as a build does, pass epubcheck with 0 errors and 0 warnings, and every link to a page of the book
lands on an id that page has."""

from __future__ import annotations

import io
import re
import zipfile
from html import unescape
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bindery import engine
from bindery.engine import epub
from bindery.engine.anchors import Anchors
from bindery.manuscript import cut
from tests.validators import epubcheck

TITLES = ("Introduction", "Café au lait", "What's new?", "1984", "A & B <c>", "Introduction", "日本語")
IDS = ("start", "a.b", "x:y", "caf\u00e9", "q&a", "fig-map", "sec-two", "tbl-one")
TARGETS = ("#introduction", "#introduction-1", "#cafe-au-lait", "#café-au-lait", "#whats-new", "#section",
           "#start", "#a.b", "#x:y", "#q&a", "#no-such-id", "#", "other.html", "../notes.md#part",
           "https://example.org/a?b=1&c=2", "mailto:keeper@example.org", "")  # fmt: skip
BLOCKS = st.one_of(
    st.builds("[{}]({})".format, st.sampled_from(["see", "the *start*", "`code`"]), st.sampled_from(TARGETS)),
    st.builds("[{}]".format, st.sampled_from(TITLES)),
    st.builds("[words][{}]".format, st.sampled_from(["site", "Café au lait", "nowhere"])),
    st.just("[site]: https://example.org/site"),
    st.builds("A note.[^{}]".format, st.sampled_from(["a", "b"])),
    st.builds("[^{}]: Defined here, with [a link](#start).".format, st.sampled_from(["a", "b"])),
    st.builds("As @{} shows.".format, st.sampled_from(["fig-map", "tbl-one", "sec-two", "fig-none"])),
    st.just("![A map](images/map.png){#fig-map}"),
    st.just("| a | b |\n|---|---|\n| 1 | 2 |\n\n: Lights {#tbl-one}"),
    st.just("<!-- a comment with [a link](#start) -->"),
    st.builds("## {}".format, st.sampled_from(TITLES)),
    st.builds("### {} {{#{}}}".format, st.sampled_from(TITLES), st.sampled_from(IDS)),
)
CHAPTER = st.tuples(st.sampled_from(TITLES), st.lists(BLOCKS, min_size=1, max_size=8))


def _epub(chapters: list[tuple[str, list[str]]]) -> bytes:
    manuscript = "".join(
        f"# {title}\n\n" + "\n\n".join(blocks) + "\n\n" for title, blocks in chapters
    ).encode()
    anchors = Anchors()
    sections = list(cut(manuscript.splitlines(keepends=True), anchors))
    source = engine.Source(
        "book", "Links", 1, tuple(s.title for s in sections), 1_700_000_000.0, anchors=anchors
    )
    texts = [
        engine.Text(n, s.title, manuscript[s.offset : s.offset + s.length].decode())
        for n, s in enumerate(sections, start=1)
    ]
    out = io.BytesIO()
    epub.RENDERER.render(source, texts, out)
    return out.getvalue()


def test_random_books_with_links_of_every_kind_make_an_epub_epubcheck_passes(tmp_path: Path) -> None:
    seen = {"n": 0}

    # (No shrinking: each example runs epubcheck, and a failure is reported with its book whole.)
    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    @given(st.lists(CHAPTER, min_size=1, max_size=4))
    def holds(chapters: list[tuple[str, list[str]]]) -> None:
        seen["n"] += 1
        data = _epub(chapters)
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            pages = {n.removeprefix("OEBPS/"): package.read(n).decode() for n in package.namelist()}
        ids = {
            (name, unescape(i)) for name, page in pages.items() for i in re.findall(r'\bid="([^"]+)"', page)
        }
        for name, page in pages.items():
            for href in map(unescape, re.findall(r'\bhref="([^"]*)"', page)):
                if href.startswith(("http", "mailto:")) or not name.endswith(".xhtml"):
                    continue
                target, _, fragment = href.partition("#")
                assert (target or name) in pages, (name, href)
                if fragment:
                    assert (target or name, fragment) in ids, (name, href)
        path = tmp_path / f"book-{seen['n']}.epub"
        path.write_bytes(data)
        report = epubcheck(path)
        assert "0 fatals / 0 errors / 0 warnings" in report, (chapters, report[-3000:])

    holds()
    assert seen["n"] == 10
