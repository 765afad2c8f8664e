"""The images `bindery books create` uploads are those the service finds: the CLI reads a manuscript with the
service's parser (markdown-it, its plugins, and the service's own comment rules), so an image's syntax in
code or in a comment is no image, and one in a note, a table cell or a link is (issue 47)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindery.engine import comments as service_comments
from bindery.engine.figures import Figures
from bindery.engine.markup import parser
from bindery_cli import comments, manuscripts

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


def _read(tmp_path: Path, text: str, *images: str) -> list[tuple[str, int]]:
    for name in images:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(PNG)
    path = tmp_path / "book.md"
    path.write_text(text, encoding="utf-8")
    return [(i.name, i.line) for i in manuscripts.read(path).images]


@pytest.mark.parametrize(
    "text",
    [
        # pandoc's MANUAL.txt, line 7441: an image's syntax in a code span, after a lone backtick in code.
        "# One\n\n    echo ` alone\n\nWrite `![img](url){external=1}` in the text.\n",
        "# One\n\nWrite `an image as\n![alt](url)` in the text.\n",  # a code span over lines
        "# One\n\n    ![img](x.png)\n",  # an indented code block (issue 47's own example)
        "# One\n\n```markdown\n![img](x.png)\n```\n",
        "# One\n\n~~~~\n![img](x.png)\n~~~\n~~~~\n",  # a shorter fence does not close a longer one
        "- item\n\n      ![img](x.png)\n",  # code inside a list item
        "# One\n\nBefore <!-- ![x](gone.png) --> after.\n",
        "# One\n\n<!--\nA note to myself:\n\n![x](gone.png)\n-->\n",
        "# One\n\nText\n<!-- ![x](gone.png)\n-->\n",  # a comment ending a paragraph
        "# One\n\n![undefined reference][nowhere]\n",  # no definition: text, not an image
        "# One\n\n\\![escaped](x.png)\n",
    ],
)
def test_an_images_syntax_in_code_or_a_comment_is_not_an_image(tmp_path: Path, text: str) -> None:
    """Given an image's syntax where the service reads none, no file is looked for beside the
    manuscript (none is there: the old scan refused these files)."""
    assert _read(tmp_path, text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# One ![h](h.png)\n", [("h.png", 1)]),
        ("# One\n\n| a | b |\n|---|---|\n| x | ![t](t.png) |\n", [("t.png", 5)]),
        ("# One\n\nA note.[^1]\n\n[^1]: With ![d](d.png).\n", [("d.png", 5)]),
        # An inline note's text is set after the chapter's: its image keeps the line it is written on.
        ("# One\n\nA note^[over\ntwo ![n](n.png)] and ![after](a.png).\n", [("n.png", 4), ("a.png", 4)]),
        ("# One\n\n![by reference][plan]\n\n[plan]: <images/plan one.png>\n", [("images/plan one.png", 3)]),
        ("# One\n\n![plan]\n\n[Plan]: plan.png\n", [("plan.png", 3)]),  # a shortcut, its label's case aside
        ("# One\n\n[![thumb](t.png)](https://example.org/big.png)\n", [("t.png", 3)]),
        # A code span over lines before an image: the image's line is still its own.
        ("# One\n\n`a\nb` then\n![x](x.png)\n", [("x.png", 5)]),
        ("# One\n\n> quoted\n> ![q](q.png)\n", [("q.png", 4)]),
        ("# One\n\n<!-- a note --> ![after](a.png)\n", [("a.png", 3)]),
        # The name the service looks the asset up by: %-escapes decoded, `./`, a query and a fragment left.
        ("# One\n\n![a](./caf%C3%A9.png?v=2#top) ![b](<b c.png>)\n", [("café.png", 3), ("b c.png", 3)]),
    ],
)
def test_an_image_the_service_finds_is_found_with_the_line_of_its_target(
    tmp_path: Path, text: str, expected: list[tuple[str, int]]
) -> None:
    found = _read(tmp_path, text, *{name for name, _ in expected})
    assert sorted(found) == sorted(expected)  # (in the order of their lines; within one, a note's come last)


def test_urls_and_ids_are_links_not_images_to_upload(tmp_path: Path) -> None:
    text = "# One\n\n![a](https://example.org/a.png) ![b](data:image/png;base64,AA) ![c](#c) ![d](//d.png)\n"
    assert _read(tmp_path, text) == []


def test_an_image_in_code_does_not_hide_the_missing_one_after_it(tmp_path: Path) -> None:
    path = tmp_path / "book.md"
    path.write_text("# One\n\n    ![img](x.png)\n\n![real](gone.png)\n", encoding="utf-8")
    with pytest.raises(manuscripts.FileError) as raised:
        manuscripts.read(path)
    assert str(raised.value) == (
        f"{path}:5: image: gone.png: no such file beside the manuscript ({tmp_path}/gone.png)"
    )


def test_the_command_lines_comment_rules_are_the_services_own_file() -> None:
    """bindery_cli/comments.py is a symlink to the service's module, not a copy that could drift."""
    cli_file = Path(comments.__file__)
    assert cli_file.is_symlink()
    assert cli_file.resolve() == Path(service_comments.__file__).resolve()


# ---- the CLI's scan against the service's parser, on manuscripts built from the pieces above ----------

# Targets: local names the service resolves, and URLs and ids it leaves links.
TARGETS = [
    "a.png",
    "images/b.png",
    "<c d.png>",
    "./e.png",
    "f.png#frag",
    "caf%C3%A9.png",
    "https://example.org/g.png",
    "data:image/png;base64,AA",
    "#h",
]
targets = st.sampled_from(TARGETS)
words = st.sampled_from(["word", "two words", "*em*", "**strong**", "~~gone~~", "a\\[b", "1 < 2"])


@st.composite
def inline(draw: Any) -> str:
    """A piece of a paragraph: words, an image of any kind, or an image's syntax in code or a comment."""
    target = draw(targets)
    kind = draw(
        st.sampled_from(
            [
                "words",
                "image",
                "image over lines",
                "reference",
                "shortcut",
                "link around",
                "inline note",
                "code span",
                "code span over lines",
                "comment",
                "comment over lines",
                "break",
            ]
        )
    )
    return {
        "words": draw(words),
        "image": f"![{draw(words)}]({target})",
        "image over lines": f'![alt over\ntwo lines]({target} "a title")',
        "reference": f"![alt][{draw(st.sampled_from(['one', 'two', 'none']))}]",
        "shortcut": f"![{draw(st.sampled_from(['One', 'two', 'none']))}]",
        "link around": f"[![thumb]({target})](https://example.org)",
        "inline note": f"^[a note with ![n]({target})]",
        "code span": f"`![code]({target})`",
        "code span over lines": f"``a span\n![code]({target})``",
        "comment": f"<!-- ![gone]({target}) -->",
        "comment over lines": f"<!-- a note\n![gone]({target}) -->",
        "break": "\n",
    }[kind]


@st.composite
def block(draw: Any) -> str:
    """A block of a manuscript: a paragraph, heading, quote, list item, table or note of inline pieces,
    or an image's syntax in a code block or a comment."""
    text = " ".join(draw(st.lists(inline(), min_size=1, max_size=5))).replace("\n ", "\n")
    line = text.replace("\n", " ")
    target = draw(targets)
    kind = draw(
        st.sampled_from(
            [
                "paragraph",
                "heading",
                "quote",
                "item",
                "table",
                "note",
                "indented code",
                "fenced code",
                "comment block",
            ]
        )
    )
    return {
        "paragraph": text,
        "heading": f"## {line}",
        "quote": "> " + text.replace("\n", "\n> "),
        "item": "- " + text.replace("\n", "\n  "),
        "table": f"| a | b |\n|---|---|\n| {line.replace('|', '')} | x |",
        "note": f"Text.[^{draw(st.integers(1, 3))}]\n\n[^{draw(st.integers(1, 3))}]: {line}",
        "indented code": f"    ![code]({target})",
        "fenced code": f"```\n![code]({target})\n```",
        "comment block": f"<!--\n{text}\n-->",
    }[kind]


definitions = st.lists(
    st.tuples(st.sampled_from(["one", "two", "One"]), targets).map(lambda d: f"[{d[0]}]: {d[1]}"),
    max_size=3,
)


def _service_images(text: str) -> list[str]:
    """Each asset's name the service's parser finds an image of, resolved as the service resolves it
    (`Figures.resolve`: a URL or an id is None)."""
    figures = Figures({}, tag=lambda asset, alt: "")
    names = []
    for token in _walk(parser().parse(text, {})):
        if token.type == "image":
            found = figures.resolve(str(token.attrGet("src") or ""), "alt")
            if isinstance(found, str):
                names.append(found)
    return names


def _walk(tokens: Any) -> Any:
    for token in tokens:
        yield token
        # An image's children are its alt text: an image there is words to every renderer, never resolved.
        if token.type != "image":
            yield from _walk(token.children or ())


@settings(max_examples=400, deadline=None)
@given(st.lists(block(), min_size=1, max_size=6), definitions)
def test_the_cli_finds_the_images_the_services_parser_finds(blocks: list[str], defined: list[str]) -> None:
    text = "# Chapter\n\n" + "\n\n".join(blocks + defined) + "\n"
    found = [name for name, _ in manuscripts.image_names(text)]
    assert sorted(found) == sorted(_service_images(text)), text


def test_a_comment_never_closed_is_named_at_its_line_before_any_image_is_looked_for(tmp_path: Path) -> None:
    # The outside test: the CLI said an image inside it was missing; the API then refused the comment.
    book = tmp_path / "unclosed.md"
    book.write_text("---\ntitle: T\n---\n# A\n\n<!--\n![x](images/x.png)\n")
    with pytest.raises(
        manuscripts.FileError, match=r"unclosed\.md:6: HTML comment: opened \(<!--\) and never"
    ):
        manuscripts.read(book)
