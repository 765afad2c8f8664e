"""A formula's MathML (`bindery.engine.formulas`) as Word's own equations (Office Math, OMML), which Word and
LibreOffice edit as equations and pandoc reads back as math: each element as the OMML structure that is
it (`m:f` a fraction, `m:sSup` a superscript, `m:rad` a root, `m:d` fences, `m:acc` an accent, `m:m` a
matrix), as pandoc's docx writer makes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from xml.etree.ElementTree import Element
from xml.sax.saxutils import escape

from bindery.engine.formulas import fenced, tree, typed, unread

if TYPE_CHECKING:
    from markdown_it.token import Token

    from bindery.engine.figures import Figures

M = "http://schemas.openxmlformats.org/officeDocument/2006/math"

# An `mover` of one of these characters is an accent on its base (Word's is the combining character); of
# one of the others, a bar or a brace.
_ACCENTS = {
    "^": "\u0302", "ˆ": "\u0302", "~": "\u0303", "˜": "\u0303", "→": "\u20d7", "⃗": "\u20d7", "˙": "\u0307",
    "¨": "\u0308", "ˇ": "\u030c", "´": "\u0301", "`": "\u0300", "˘": "\u0306",
}  # fmt: skip
_BARS = {"¯": "top", "‾": "top", "_": "bot"}
_BRACES = {"⏞": "top", "⏟": "bot", "⏜": "top", "⏝": "bot"}

# The operators Word sets as n-ary (`m:nary`), their limits and what they act on one structure.
_NARY = set("∑∏∐⋂⋃∫∬∭∮⋀⋁⨀⨁⨂")
_BRACKETS = set("()[]{}|‖⟨⟩")

# What an identifier's variant makes its run: upright (`p`), bold (`b`), bold italic (`bi`).
_STYLES = {"normal": "p", "bold": "b", "bold-italic": "bi"}


def word_formula(token: Token, figures: Figures | None, code: Callable[[str], str]) -> str:
    """The formula as a Word equation; or, where its TeX does not convert, that TeX as `code` sets it (and
    named in the notes)."""
    root = tree(token)
    if root is None:
        unread(figures, token)
        return code(typed(token))
    return omml(root)


def omml(root: Element) -> str:
    """An `m:oMath` of the formula, set inline; a display one is its own paragraph (`m:oMathPara`)."""
    inner = f"<m:oMath>{_children(root)}</m:oMath>"
    return f"<m:oMathPara>{inner}</m:oMathPara>" if root.get("display") == "block" else inner


def _children(node: Element) -> str:
    out: list[str] = []
    n = 0
    while n < len(node):
        child = node[n]
        after = node[n + 1] if n + 1 < len(node) else None
        if _nary(child) is not None:  # `\\sum_{i}^{n} x`: the sum of what follows it
            out.append(_nary_of(child, _set(after) if after is not None else ""))
            n += 2
        elif (
            after is not None
            and n + 2 < len(node)
            and _stacked(after)
            and _bracket(child)
            and _bracket(node[n + 2])
        ):
            out.append(_fences(child.text or "", node[n + 2].text or "", _set(after)))  # `pmatrix`, `\\binom`
            n += 3
        else:
            out.append(_set(child))
            n += 1
    return "".join(out)


def _stacked(node: Element) -> bool:
    return node.tag == "mtable" or (node.tag == "mfrac" and node.get("linethickness") == "0")


def _bracket(node: Element) -> bool:
    return node.tag == "mo" and bool(node.text) and (node.text or "") in _BRACKETS


def _nary(node: Element) -> str | None:
    """The operator of a sum, product or integral with limits, or None."""
    if node.tag not in ("msub", "msup", "msubsup", "munder", "mover", "munderover") or not len(node):
        return None
    base = node[0]
    return base.text if base.tag == "mo" and base.text in _NARY else None


def _nary_of(node: Element, operand: str) -> str:
    limits = node.tag.startswith("mu")
    low = node[1] if node.tag in ("msub", "msubsup", "munder", "munderover") else None
    high = node[-1] if node.tag in ("msup", "msubsup", "mover", "munderover") else None
    props = f'<m:chr m:val="{node[0].text}"/><m:limLoc m:val="{"undOvr" if limits else "subSup"}"/>'
    props += '<m:subHide m:val="1"/>' if low is None else ""
    props += '<m:supHide m:val="1"/>' if high is None else ""
    low_set = _set(low) if low is not None else ""
    high_set = _set(high) if high is not None else ""
    return (
        f"<m:nary><m:naryPr>{props}</m:naryPr>{_e(low_set, 'sub')}{_e(high_set, 'sup')}{_e(operand)}</m:nary>"
    )


def _fences(opening: str, closing: str, inner: str) -> str:
    shape = f'<m:dPr><m:begChr m:val="{_attr(opening)}"/><m:endChr m:val="{_attr(closing)}"/></m:dPr>'
    return f"<m:d>{shape}{_e(inner)}</m:d>"


def _attr(value: str) -> str:
    return escape(value, {'"': "&quot;"})


def _e(content: str, name: str = "e") -> str:
    return f"<m:{name}>{content}</m:{name}>"


def _set(node: Element) -> str:
    tag = node.tag
    if tag in ("mi", "mn", "mo", "mtext", "ms"):
        return _run(node)
    if tag == "mspace":
        return _text_run("\u2003" if node.get("width") in ("1em", "2em") else "\u2009", "p")
    if tag == "mfrac" and len(node) == 2:
        kind = '<m:fPr><m:type m:val="noBar"/></m:fPr>' if node.get("linethickness") == "0" else ""
        return f"<m:f>{kind}{_e(_set(node[0]), 'num')}{_e(_set(node[1]), 'den')}</m:f>"
    if tag == "msup" and len(node) == 2:
        return f"<m:sSup>{_e(_set(node[0]))}{_e(_set(node[1]), 'sup')}</m:sSup>"
    if tag == "msub" and len(node) == 2:
        return f"<m:sSub>{_e(_set(node[0]))}{_e(_set(node[1]), 'sub')}</m:sSub>"
    if tag == "msubsup" and len(node) == 3:
        return (
            f"<m:sSubSup>{_e(_set(node[0]))}{_e(_set(node[1]), 'sub')}{_e(_set(node[2]), 'sup')}</m:sSubSup>"
        )
    if tag in ("mover", "munder") and len(node) == 2:
        return _over(node, tag == "mover")
    if tag == "munderover" and len(node) == 3:
        low = f"<m:limLow>{_e(_set(node[0]))}{_e(_set(node[1]), 'lim')}</m:limLow>"
        return f"<m:limUpp>{_e(low)}{_e(_set(node[2]), 'lim')}</m:limUpp>"
    if tag == "msqrt":
        return f'<m:rad><m:radPr><m:degHide m:val="1"/></m:radPr><m:deg/>{_e(_children(node))}</m:rad>'
    if tag == "mroot" and len(node) == 2:
        return f"<m:rad>{_e(_set(node[1]), 'deg')}{_e(_set(node[0]))}</m:rad>"
    if tag == "mtable":
        rows = [
            [_e(_children(cell)) for cell in row if cell.tag == "mtd"] for row in node if row.tag == "mtr"
        ]
        width = max((len(row) for row in rows), default=0)
        lines = "".join(f"<m:mr>{''.join(row + [_e('')] * (width - len(row)))}</m:mr>" for row in rows)
        return f"<m:m>{lines}</m:m>" if width else ""
    if tag == "mrow" and (fences := fenced(node)) is not None:
        inner = Element("mrow")
        inner.extend(node[1:-1])
        return _fences(*fences, _children(inner))
    return _children(node)  # mrow, mstyle, mpadded, menclose and the rest: what they hold


def _over(node: Element, over: bool) -> str:
    base, mark = _e(_set(node[0])), (node[1].text or "") if node[1].tag == "mo" else ""
    if over and mark in _ACCENTS:
        return f'<m:acc><m:accPr><m:chr m:val="{_ACCENTS[mark]}"/></m:accPr>{base}</m:acc>'
    if mark in _BARS:
        return f'<m:bar><m:barPr><m:pos m:val="{"top" if over else "bot"}"/></m:barPr>{base}</m:bar>'
    if mark in _BRACES:
        where, towards = _BRACES[mark], "bot" if over else "top"
        shape = f'<m:chr m:val="{_attr(mark)}"/><m:pos m:val="{where}"/><m:vertJc m:val="{towards}"/>'
        return f"<m:groupChr><m:groupChrPr>{shape}</m:groupChrPr>{base}</m:groupChr>"
    kind = "limUpp" if over else "limLow"
    return f"<m:{kind}>{base}{_e(_set(node[1]), 'lim')}</m:{kind}>"


def _run(node: Element) -> str:
    text = node.text or ""
    if not text:
        return ""
    tag = node.tag
    if tag in ("mtext", "ms"):  # words, as text: Word's normal text in an equation
        return f'<m:r><m:rPr><m:nor/></m:rPr><m:t xml:space="preserve">{escape(text)}</m:t></m:r>'
    style = _STYLES.get(node.get("mathvariant", ""))
    if style is None and (tag in ("mn", "mo") or len(text) > 1):
        style = "p"  # numbers, operators, text and names (`sin`) stand upright; a letter is italic
    return _text_run(text, style)


def _text_run(text: str, style: str | None) -> str:
    props = f'<m:rPr><m:sty m:val="{style}"/></m:rPr>' if style else ""
    return f'<m:r>{props}<m:t xml:space="preserve">{escape(text)}</m:t></m:r>'
