"""Code in a fenced block that names its language (```python), highlighted in the same colours in every
format, from the one table of `KINDS`: html and epub colour a `span` of each token's class, the docx a run
in each token's character style, and the pdf's Typst its `raw` by `THEME`, a TextMate theme written from the
same table into the compile root beside book.typ.

Pygments reads the code for html, epub and docx; Typst reads its own (its syntaxes' scopes are matched to
the table's kinds by each kind's `scopes`). The class names are pandoc's html classes and the styles its
docx styles (`KeywordTok`, `StringTok`...), so pandoc reads a docx back, and a Word user knows them.
Every colour is at least WCAG AA's 4.5:1 against the block's ground, `GROUND` (book.typ's luma(244)).

The language is the author's text: it is looked up in `LANGUAGES`, never written into markup here. A
language not named there (Pygments may know it, but its lexer was not measured to read in bounded work),
no language, and a block past `MAX_CHARS` or with a line past `MAX_LINE` are left plain, as is a block whose
tokens do not give back its text exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygments.lexer import Lexer

GROUND = "#f4f4f4"  # a code block's ground in every format: book.typ's luma(244)
THEME = "code.tmTheme"  # the pdf's theme, written beside book.typ (`theme`)
# A Pygments lexer reads in Python, a regex at a time, and many backtrack: JavaScript's took 0.7 s over one
# line of 16 KB ("1.e" repeated), TypeScript's 3 s, and some of Pygments' others over 5 s. In lines of at
# most MAX_LINE characters, the work of the lexers of LANGUAGES grows with the block (8 KB of the worst of 29
# shapes, in lines of 120, took each 0.006 to 0.19 s, and four times it about four times that), so a block
# with a longer line is plain, and so is one past MAX_CHARS. Others do not: Java's took 2.7 s over 8 KB of
# `a a a ...` in such lines and over 8 s at 32 KB, Rust's 0.12 s and 1.4 s (`r#"`), HTML's 0.28 s and 4.5 s
# (`<?`, XML's alike): they are not named.
MAX_CHARS = 32 * 1024
MAX_LINE = 120
# The languages highlighted, each by Pygments' names for it: those whose lexers were measured as above.
LANGUAGES = frozenset(
    {"python", "py", "python3", "py3", "pyi", "javascript", "js", "typescript", "ts", "c", "cpp", "c++"}
    | {"go", "golang", "ruby", "rb", "bash", "sh", "shell", "zsh", "json", "yaml", "yml"}
)


@dataclass(frozen=True)
class Kind:
    """A kind of token: its docx character style (pandoc's), html class (pandoc's), colour, the Pygments
    token types it colours (and theirs below, unless a type below has a row of its own), and the TextMate
    scopes (a selector) it colours in the pdf."""

    style: str
    css: str
    colour: str
    tokens: tuple[str, ...]
    scopes: str = ""


# The colours are Typst's default theme's, darkened where they fell short of 4.5:1 on GROUND (its keyword
# red #d73a49 at 4.2, string green #298e0d at 3.8, comment grey #8a8a8a at 3.1).
KINDS = (
    Kind(
        "KeywordTok",
        "kw",
        "#c02a3a",
        ("Keyword", "Operator.Word", "Name.Tag"),
        "keyword - keyword.operator, keyword.operator.word, keyword.operator.logical, storage, "
        "entity.name.tag",
    ),
    Kind(
        "ConstantTok",
        "cn",
        "#b60157",
        ("Keyword.Constant", "Name.Constant", "Name.Builtin.Pseudo"),
        "constant, variable.language",
    ),
    Kind("DecValTok", "dv", "#b60157", ("Number",)),
    Kind("StringTok", "st", "#237a0b", ("String",), "string"),
    Kind("SpecialCharTok", "sc", "#1d6c76", ("String.Escape",), "constant.character.escape"),
    Kind(
        "SpecialStringTok",
        "ss",
        "#8b41b1",
        ("String.Interpol", "String.Regex"),
        "meta.interpolation, string.regexp",
    ),
    Kind("CommentTok", "co", "#6a6a6a", ("Comment",), "comment"),
    Kind("DocumentationTok", "do", "#6a6a6a", ("String.Doc",)),  # a docstring, a comment to Typst's syntaxes
    Kind("PreprocessorTok", "pp", "#16718d", ("Comment.Preproc", "Comment.PreprocFile"), "meta.preprocessor"),
    Kind("FunctionTok", "fu", "#4b69c6", ("Name.Function",), "entity.name, variable.function, support"),
    Kind("BuiltInTok", "bu", "#4b69c6", ("Name.Builtin",)),
    Kind("DataTypeTok", "dt", "#4b69c6", ("Name.Class", "Name.Exception")),
    Kind(
        "AttributeTok", "at", "#8b41b1", ("Name.Decorator", "Name.Attribute"), "entity.other, meta.annotation"
    ),
)
Piece = tuple[Kind | None, str]  # a token's text, and its kind (None: plain)


def eligible(code: str, language: str) -> bool:
    """Whether a block is highlighted, in every format (the pdf's Typst is told its language only then): a
    language of LANGUAGES, at most MAX_CHARS, no line longer than MAX_LINE."""
    return (
        language.lower() in LANGUAGES
        and len(code) <= MAX_CHARS
        and not any(len(line) > MAX_LINE for line in code.split("\n"))
    )


def pieces(code: str, info: str) -> list[Piece] | None:
    """`code` as its language's tokens, each with its kind, neighbours of one kind joined; None when it is
    to be plain. `info` is the fence's info string: its first word names the language."""
    words = info.split(maxsplit=1)
    name = words[0].lower() if words else ""
    if not eligible(code, name):
        return None
    lexer = _lexer(name)
    out: list[Piece] = []
    for token_type, value in lexer.get_tokens(code):
        kind = _kind(token_type)
        if out and out[-1][0] is kind:
            out[-1] = (kind, out[-1][1] + value)
        elif value:
            out.append((kind, value))
    if "".join(value for _, value in out) != code or all(kind is None for kind, _ in out):
        return None  # a lexer that changed the text (or coloured none of it) is not trusted with it
    return out


def html(code: str, language: str, attributes: str = "") -> str:
    """The code as html, markdown-it's `highlight`: each token of a kind in a `span` of its class; "" when
    it is plain (markdown-it then escapes it, as it does any code)."""
    found = pieces(code, language)
    if found is None:
        return ""
    return "".join(f'<span class="{kind.css}">{escape(v)}</span>' if kind else escape(v) for kind, v in found)


def css() -> str:
    """The html's and epub's rules: a code block's ground, and each kind's colour (only inside `pre`, so an
    author's span of the same class elsewhere is not coloured)."""
    rules = "".join(f"pre span.{kind.css}{{color:{kind.colour}}}" for kind in KINDS)
    return f"pre{{background:{GROUND}}}{rules}\n"


def word(code: str, info: str, props: str) -> str:
    """The code as docx runs: each token of a kind in its kind's character style, the rest in the code's
    (`VerbatimChar`), each with `props` after; "" when it is plain."""
    from bindery.engine.ooxml import run

    found = pieces(code, info)
    if found is None:
        return ""
    styles = [(kind.style if kind else "VerbatimChar", value) for kind, value in found]
    return "".join(run(value, f'<w:rStyle w:val="{style}"/>{props}') for style, value in styles)


def word_styles(style: Callable[[str, str, str, str, str], str]) -> list[str]:
    """Each kind's docx character style, made by `style(kind, id, name, body, based on)`: its colour, on
    the code's own style."""
    return [
        style(
            "character",
            k.style,
            k.style,
            f'<w:rPr><w:color w:val="{k.colour[1:].upper()}"/></w:rPr>',
            "VerbatimChar",
        )
        for k in KINDS
    ]


def theme() -> str:
    """The pdf's TextMate theme: each kind's scopes in its colour (Typst reads only the scoped colours,
    never a theme's own foreground or ground)."""
    entries = "".join(
        f"<dict><key>name</key><string>{k.style}</string><key>scope</key><string>{escape(k.scopes)}</string>"
        f"<key>settings</key><dict><key>foreground</key><string>{k.colour}</string></dict></dict>"
        for k in KINDS
        if k.scopes
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict><key>name</key>'
        f"<string>Bindery</string><key>settings</key><array><dict><key>settings</key><dict/></dict>{entries}"
        "</array></dict></plist>\n"
    )


@cache
def _lexer(name: str) -> Lexer:
    """The lexer Pygments knows by `name`, one of `LANGUAGES`."""
    from pygments.lexers import get_lexer_by_name

    # Keep the text as written: no newline stripped from either end, none added, tabs as they are.
    return get_lexer_by_name(name, stripnl=False, ensurenl=False)


@cache
def _types() -> dict[object, Kind]:
    from pygments.token import string_to_tokentype

    return {string_to_tokentype(name): kind for kind in KINDS for name in kind.tokens}


@cache
def _kind(token_type: object) -> Kind | None:
    """The kind of a Pygments token type: its own row's, else its nearest parent's."""
    types = _types()
    while token_type is not None:
        if token_type in types:
            return types[token_type]
        token_type = getattr(token_type, "parent", None)
    return None
