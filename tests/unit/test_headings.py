"""Headings' identifiers are pandoc's, for every heading text an author may write: the same ids pandoc gives
the same manuscript, numbered as it numbers duplicates, an explicit `{#id}` kept (bindery.engine.headings)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bindery.engine import headings
from bindery.engine.markup import parser
from tests.validators import pandoc


def _pandocs(manuscript: str) -> list[str]:
    """The id pandoc gives each heading of `manuscript`, in order."""
    out = pandoc("-f", "markdown", "-t", "json", text=manuscript)
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("t") == "Header":
                found.append(node["c"][1][0])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(out)["blocks"])
    return found


def _ours(manuscript: str, md: MarkdownIt | None = None) -> list[str]:
    tokens = (md or parser()).parse(manuscript)
    given = headings.Identifiers()
    return [
        given.claim(*headings.explicit_and_words(tokens, i))
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]


FRAGMENTS = [
    "Intro", "intro", "Über", "straße", "Ωmega", "日本語", "العربية", "עברית", "हिन्दी", "naïve", "ÉCOLE",
    "2nd", "1.2", "3", "v1.0", "a_b", "x-y", "A.B.", "...", "--", "---", "—", "&", "&amp;", "(c)", "?!", "'s",
    '"quoted"', "a/b", "50%", "C++", "#hash", "`code here`", "`a--b`", "*emph*", "**strong**", "[link](http://x.y)",
    "![alt text](p.png)", "\\*", "  ", "Ⅻ", "½", "x²",
]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6), min_size=1, max_size=12))
def test_every_heading_gets_the_id_pandoc_gives_it(texts: list[list[str]]) -> None:
    lines = [" ".join(fragments).strip() or "x" for fragments in texts]
    manuscript = "".join(f"## {line}\n\ntext\n\n" for line in lines)
    assert _ours(manuscript) == _pandocs(manuscript), lines


def test_duplicates_are_numbered_as_pandoc_numbers_them_around_explicit_ids() -> None:
    manuscript = (
        "# Intro\n\n## Intro\n\n## Intro {#intro-2}\n\n## Intro\n\n# 123\n\n# ...\n\n# Section\n\n"
        "## Notes {#notes .unnumbered}\n\n## Notes\n\n## A {-}\n\n### Über *alles* `x` [link](#y)\n"
    )
    assert _ours(manuscript) == _pandocs(manuscript)
    assert _ours(manuscript) == [
        "intro", "intro-1", "intro-2", "intro-3", "section", "section-1", "section-2", "notes", "notes-1",
        "a", "über-alles-x-link",
    ]  # fmt: skip


def test_attributes_leave_the_heading_and_give_its_id_and_classes() -> None:
    tokens = parser().parse(
        "# Title {#the-id .part .unlisted lang=fr}\n\n## Plain {not attributes}\n\n## A {-}\n"
    )
    opened = [t for t in tokens if t.type == "heading_open"]
    shown = [tokens[tokens.index(t) + 1].content for t in opened]
    assert shown == ["Title", "Plain {not attributes}", "A"]
    assert (opened[0].attrGet("id"), opened[0].attrGet("class")) == ("the-id", "part unlisted")
    assert opened[0].meta["attributes"] == {"lang": "fr"}
    assert opened[2].attrGet("class") == "unnumbered"


def test_many_headings_of_one_text_are_numbered_in_linear_work() -> None:
    given = headings.Identifiers()
    ids = [given.claim(None, "Same") for _ in range(20_000)]
    assert ids[0] == "same" and ids[-1] == "same-19999" and len(set(ids)) == 20_000
    # Each claim looked at one free number: the search goes on from the last one given.
    assert given._next["same"] == 20_000


def test_an_explicit_id_given_twice_is_the_first_headings_and_a_later_one_is_numbered_by_its_words() -> None:
    # pandoc gives both headings the id; no page may hold one twice (epubcheck refuses it), and a link to
    # it lands on the first, as a browser's does.
    ids = headings.Identifiers()
    assert [ids.claim("start", "One"), ids.claim("start", "Two"), ids.claim(None, "start")] == [
        "start", "two", "start-1",
    ]  # fmt: skip
