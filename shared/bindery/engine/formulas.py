"""TeX math, as pandoc reads it: `$...$` inline and `$$...$$` display, each read once into MathML
(latex2mathml), which every format then sets in its own math: MathML in the html and epub, Typst's math in
the pdf (`bindery.engine.formula_typst`) and Word's equations in the docx (`bindery.engine.formula_word`).

What a formula is, in pandoc's words: an inline one opens with `$` and a character that is not a space, and
closes at the next `$` no backslash escapes, which must follow a character that is not a space and come
before no digit (so `$5 and $10` is text); a display one runs from `$$` to the next `$$`. Each search ends
at the next dollar sign, so a paragraph is read in linear work whatever its dollars.

TeX that does not convert (an unknown command, a brace left open, too long or too deep to set) stays on
the page as the author typed it, in code, and the build's notes name it (`math_unread`, with its chapter and
line): a formula never fails a chapter.
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape, unescape
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

    from bindery.engine.figures import Figures

KINDS = ("math_inline", "math_display")

# A formula of more TeX than this, or nested deeper, is left as TeX: a book's longest run to a few hundred
# characters, and Typst's parser stops at 256 deep.
MAX_TEX = 10_000
MAX_DEPTH = 48

MATHML = "http://www.w3.org/1998/Math/MathML"

# From an inline formula's first character: what it holds (a backslash escapes any character, so `\$` is
# no end), then the dollar that ends it.
_INLINE = re.compile(r"(?:[^$\\]|\\.)*\$", re.DOTALL)

# A command latex2mathml did not know, left as an identifier of its own name (`\\backslash` is the character).
_COMMAND = re.compile(r"\\[A-Za-z]+")

# Environments latex2mathml does not know, as the one it does that sets them alike.
_ENVIRONMENTS = re.compile(r"\\(begin|end)\{(aligned|alignedat|eqnarray\*?)\}")


def install(md: MarkdownIt) -> None:
    md.inline.ruler.after("backticks", "math", formula)
    for kind in KINDS:
        md.add_render_rule(kind, _html)


def formula(state: StateInline, silent: bool) -> bool:
    src, start, end = state.src, state.pos, state.posMax
    if src[start] != "$" or start + 1 >= end:
        return False
    if src[start + 1] == "$":  # display: to the next `$$`
        close = src.find("$$", start + 2, end)
        tex = src[start + 2 : close]
        if close < 0 or not tex:
            return False
        kind, after = "math_display", close + 2
    else:
        if src[start + 1].isspace():
            return False
        found = _INLINE.match(src, start + 1, end)
        if found is None:
            return False
        close = found.end() - 1
        if src[close - 1].isspace() or (close + 1 < end and src[close + 1].isdigit()):
            return False
        kind, after, tex = "math_inline", close + 1, src[start + 1 : close]
    if not silent:
        token = state.push(kind, "math", 0)
        token.content = tex
        token.markup = src[start:after]
    state.pos = after
    return True


def typed(token: Token) -> str:
    """The formula as the author typed it, dollars and all: what a page shows of TeX that did not convert."""
    return token.markup


def tree(token: Token) -> ElementTree.Element | None:
    """The formula's MathML (a `math` element), or None when its TeX does not convert."""
    return _converted(token.content, token.type == "math_display")


@lru_cache(maxsize=512)
def _converted(tex: str, display: bool) -> ElementTree.Element | None:
    if len(tex) > MAX_TEX:
        return None
    from latex2mathml.converter import convert_to_element

    try:
        root = convert_to_element(
            _ENVIRONMENTS.sub(r"\\\1{align*}", tex), display="block" if display else "inline"
        )
    except Exception:
        return None
    return root if _read(root, 0, "\\&" in tex) else None


def forget() -> None:
    """Read every formula afresh (a test counting the work of reading them)."""
    _converted.cache_clear()


def _read(node: ElementTree.Element, depth: int, escaped: bool) -> bool:
    """Whether latex2mathml read every command (it leaves one it does not know, and `&` outside a table, as
    an identifier of its own text); each element's text made the characters it stands for (it holds
    them as character references)."""
    if depth > MAX_DEPTH:
        return False
    if node.text:
        node.text = unescape(node.text)
        if node.tag in ("mi", "mo") and (_COMMAND.fullmatch(node.text) or (node.text == "&" and not escaped)):
            return False
    return all(_read(child, depth + 1, escaped) for child in node)


def unread(figures: Figures | None, token: Token) -> None:
    """Name a formula that did not convert in the build's notes."""
    if figures is not None:
        ordinal, title = figures.chapter
        note = {"code": "math_unread", "chapter": ordinal, "chapter_title": title}
        figures.notes.warn({**note, "line": token.meta.get("line"), "tex": token.content[:200]})


def mathml(root: ElementTree.Element, tex: str) -> str:
    """The MathML of a formula, with its TeX as its text alternative (what a reader without MathML, or a
    screen reader, is given) and as its annotation, as pandoc writes it."""
    body = "".join(ElementTree.tostring(child, encoding="unicode") for child in root)
    return (
        f'<math xmlns="{MATHML}" display="{root.get("display")}" alttext="{escape(tex)}">'
        f'<semantics><mrow>{body}</mrow><annotation encoding="application/x-tex">{escape(tex, quote=False)}'
        "</annotation></semantics></math>"
    )


def _html(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    root = tree(token)
    if root is None:
        unread(env.get("figures"), token)
        return f'<code class="math">{escape(typed(token))}</code>'
    env["math"] = True
    return mathml(root, token.content)


def fenced(node: ElementTree.Element) -> tuple[str, str] | None:
    """The fences of an `mrow` TeX's `\\left` and `\\right` made (their characters, either may be empty),
    or None."""
    if len(node) < 2:
        return None
    first, last = node[0], node[-1]
    if first.tag != "mo" or last.tag != "mo" or first.get("fence") != "true" or last.get("fence") != "true":
        return None
    return first.text or "", last.text or ""
