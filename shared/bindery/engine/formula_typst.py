"""A formula's MathML (`bindery.engine.formulas`) as Typst math, the pdf's: each element as the Typst function
that sets it (`frac`, `attach`, `sqrt`, `root`, `accent`, `lr`, `mat`), every ASCII mark escaped so that
nothing the author typed reads as Typst, and the TeX as the equation's alternative text (PDF/UA asks one of
each)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.etree.ElementTree import Element

from bindery.engine.formulas import KINDS, fenced, tree, typed, unread
from bindery.engine.literals import literal

if TYPE_CHECKING:
    from markdown_it.token import Token

    from bindery.engine.figures import Figures
    from bindery.engine.paragraphs import Paragraph

__all__ = ["KINDS", "equation", "typeset"]

# What an `mover` or `munder` of one of these characters is: an accent, a line or a brace over (under) its
# base, in Typst's words.
_OVER = {
    "^": "accent({}, hat)", "ˆ": "accent({}, hat)", "~": "accent({}, tilde)", "˜": "accent({}, tilde)",
    "¯": "overline({})", "‾": "overline({})", "→": "accent({}, arrow)", "⃗": "accent({}, arrow)",
    "˙": "accent({}, dot)", "¨": "accent({}, dot.double)", "ˇ": "accent({}, caron)", "´": "accent({}, acute)",
    "`": "accent({}, grave)", "˘": "accent({}, breve)", "⏞": "overbrace({})", "⏜": "overparen({})",
}  # fmt: skip
_UNDER = {"_": "underline({})", "¯": "underline({})", "‾": "underline({})", "⏟": "underbrace({})"}

# TeX's spaces (latex2mathml's widths) as Typst's.
_SPACES = {"0.167em": "thin", "0.222em": "med", "0.278em": "thick", "1em": "quad", "2em": "wide"}

# A variant of an identifier (`\mathbf`, `\mathrm`) as Typst's function for it.
_VARIANTS = {
    "normal": "upright", "bold": "bold", "italic": "italic", "double-struck": "bb", "fraktur": "frak",
    "script": "cal", "sans-serif": "sans", "monospace": "mono", "bold-italic": "bold",
}  # fmt: skip


def typeset(token: Token, paragraph: Paragraph, figures: Figures | None) -> None:
    """Set the formula in `paragraph`: a Typst equation, or, where its TeX does not convert, that TeX as
    code (and named in the notes)."""
    root = tree(token)
    if root is None:
        unread(figures, token)
        paragraph.code(typed(token))
    else:
        paragraph.element(equation(root, token.content))


def equation(root: Element, tex: str) -> str:
    """The formula as a Typst equation in markup, its TeX the equation's alternative text."""
    block = "true" if root.get("display") == "block" else "false"
    return f"#math.equation(block: {block}, alt: {literal(tex)}, ${_children(root)}$.body)"


def _children(node: Element) -> str:
    parts = [_set(child) for child in node]
    for n in range(1, len(node) - 1):  # a matrix's brackets (`pmatrix`, `\\binom`) grow with it
        if _stacked(node[n]) and _bracket(node[n - 1]) and _bracket(node[n + 1]):
            parts[n - 1 : n + 2] = ["", f"lr({parts[n - 1]} {parts[n]} {parts[n + 1]})", ""]
    return " ".join(part for part in parts if part)


def _stacked(node: Element) -> bool:
    return node.tag == "mtable" or (node.tag == "mfrac" and node.get("linethickness") == "0")


def _bracket(node: Element) -> bool:
    return node.tag == "mo" and (node.text or "") in "()[]{}|‖⟨⟩" and bool(node.text)


def _set(node: Element) -> str:
    tag = node.tag
    if tag in ("mi", "mn", "mo", "mtext", "ms"):
        return _token(node)
    if tag == "mspace":
        if node.get("linebreak") == "newline":
            return "\\ "
        return _SPACES.get(node.get("width", ""), "thin")
    if tag == "mfrac":
        if len(node) != 2:
            return _children(node)
        if node.get("linethickness") == "0":  # \binom's stack, between parentheses of its own
            return f"mat(delim: #none, {_set(node[0])}; {_set(node[1])})"
        return f"frac({_set(node[0])}, {_set(node[1])})"
    if tag in ("msup", "msub", "msubsup") and len(node) == (3 if tag == "msubsup" else 2):
        scripts = {"msup": ["t"], "msub": ["b"], "msubsup": ["b", "t"]}[tag]
        return _attached(node, scripts, limits=False)
    if tag in ("mover", "munder", "munderover") and len(node) == (3 if tag == "munderover" else 2):
        mark = (node[1].text or "") if node[1].tag == "mo" and len(node) == 2 else ""
        shape = (_OVER if tag == "mover" else _UNDER).get(mark)
        if shape is not None:
            return shape.format(_set(node[0]) or "zws")
        scripts = {"mover": ["t"], "munder": ["b"], "munderover": ["b", "t"]}[tag]
        return _attached(node, scripts, limits=True)
    if tag == "msqrt":
        return f"sqrt({_children(node) or 'zws'})"
    if tag == "mroot" and len(node) == 2:
        return f"root({_set(node[1])}, {_set(node[0]) or 'zws'})"
    if tag == "mtable":
        return _table(node)
    if tag == "mrow" and (fences := fenced(node)) is not None:
        inner = " ".join(part for part in map(_set, node[1:-1]) if part)
        opening, closing = (_escaped(fence) if fence else "" for fence in fences)
        return f"lr({opening} {inner} {closing})"
    if tag == "mstyle" and node.get("mathvariant") in _VARIANTS:
        return f"{_VARIANTS[node.get('mathvariant', '')]}({_children(node) or 'zws'})"
    return _children(node)  # mrow, mstyle, mpadded, menclose and the rest: what they hold


def _attached(node: Element, scripts: list[str], *, limits: bool) -> str:
    base = _set(node[0]) or "zws"
    placed = ", ".join(
        f"{where}: {_set(script) or 'zws'}" for where, script in zip(scripts, node[1:], strict=True)
    )
    return f"attach({f'limits({base})' if limits else base}, {placed})"


def _table(node: Element) -> str:
    """A table: TeX's `align` (a right column, then a left, and so on) as lines aligned at `&`, any other as
    Typst's `mat`, without delimiters (the parentheses of a `pmatrix` are the MathML's own)."""
    rows = [[_children(cell) for cell in row if cell.tag == "mtd"] for row in node if row.tag == "mtr"]
    aligns = {cell.get("columnalign") for row in node for cell in row}
    if "right" in aligns and "left" in aligns:
        return " \\ ".join(" & ".join(row) for row in rows)
    width = max((len(row) for row in rows), default=0)
    cells = "; ".join(", ".join((row + ["zws"] * width)[:width]) for row in rows if width)
    return f"mat(delim: #none, {cells})" if cells else "zws"


def _token(node: Element) -> str:
    text = node.text or ""
    if not text.strip():
        return "thin" if text else ""
    if node.tag in ("mtext", "ms"):
        return _string(text)
    if len(text) == 1:
        written = _escaped(text)
    elif node.tag == "mn":
        written = "".join(char if char == "." else _escaped(char) for char in text)
    else:  # a name of several letters (`\\sin`, `\\lim`): an operator's, never a Typst variable
        written = f"op({_string(text)})"
    variant = node.get("mathvariant")
    if variant in _VARIANTS and not (variant == "normal" and written.startswith('"')):
        return f"{_VARIANTS[variant]}({written})"
    return written


def _escaped(char: str) -> str:
    """A character as Typst math reads it as itself: a letter or digit as it is, any other ASCII escaped."""
    if char.isalnum() or ord(char) > 127:
        return char
    return "\\" + char


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
