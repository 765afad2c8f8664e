"""The fixed parts of a docx package: its content types and relationships, the styles every paragraph
names, the numbering its lists use, its settings, and its metadata (docProps/core.xml).

The styles carry the book's whole look, so a paragraph names a style and nothing else. Their ids and names
are Word's own built-in ones where Word has one (`heading 1`, `Title`, `Block Text`, `footnote text`,
`caption`...), so Word's table of contents, navigation pane and style gallery treat them as its own; the
rest (`First Paragraph`, `Source Code`, `Verbatim Char`, `Compact`, `Figure`) are the names pandoc gives
the same things.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bindery.engine.highlighting import word_styles
from bindery.engine.ooxml import text

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
DOCUMENT_NAMESPACES = (
    f'xmlns:w="{W}" xmlns:r="{R}" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture" '
    'xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"'
)
HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'

# A4 with 2.5 cm margins, in twentieths of a point; the text block in EMU (635 a twip), which images fit.
PAGE_W, PAGE_H, MARGIN = 11906, 16838, 1418
TEXT_W = PAGE_W - 2 * MARGIN
TEXT_CX, TEXT_CY = TEXT_W * 635, (PAGE_H - 2 * MARGIN) * 635

_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml"
CONTENT_TYPES = (
    HEAD + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Default Extension="png" ContentType="image/png"/>'
    '<Default Extension="jpg" ContentType="image/jpeg"/>'
    '<Default Extension="gif" ContentType="image/gif"/>'
    f'<Override PartName="/word/document.xml" ContentType="{_MAIN}.document.main+xml"/>'
    f'<Override PartName="/word/styles.xml" ContentType="{_MAIN}.styles+xml"/>'
    f'<Override PartName="/word/settings.xml" ContentType="{_MAIN}.settings+xml"/>'
    f'<Override PartName="/word/numbering.xml" ContentType="{_MAIN}.numbering+xml"/>'
    f'<Override PartName="/word/footnotes.xml" ContentType="{_MAIN}.footnotes+xml"/>'
    '<Override PartName="/docProps/core.xml" '
    'ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
    '<Override PartName="/docProps/app.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.extended-properties+xml"/>'
    "</Types>"
)

PACKAGE_RELATIONSHIPS = (
    HEAD + f'<Relationships xmlns="{PACKAGE_RELS}">'
    f'<Relationship Id="rId1" Type="{R}/officeDocument" Target="word/document.xml"/>'
    '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/'
    'core-properties" Target="docProps/core.xml"/>'
    f'<Relationship Id="rId3" Type="{R}/extended-properties" Target="docProps/app.xml"/>'
    "</Relationships>"
)

APP = (
    HEAD + '<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties">'
    "<Application>Bindery</Application></Properties>"
)

# The document's own relationships; the images' and the links' follow them.
DOCUMENT_RELATIONSHIPS = (
    HEAD + f'<Relationships xmlns="{PACKAGE_RELS}">'
    f'<Relationship Id="rIdStyles" Type="{R}/styles" Target="styles.xml"/>'
    f'<Relationship Id="rIdSettings" Type="{R}/settings" Target="settings.xml"/>'
    f'<Relationship Id="rIdNumbering" Type="{R}/numbering" Target="numbering.xml"/>'
    f'<Relationship Id="rIdFootnotes" Type="{R}/footnotes" Target="footnotes.xml"/>'
)
IMAGE_RELATIONSHIP = f"{R}/image"
LINK_RELATIONSHIP = f"{R}/hyperlink"

# Word asks to update the fields (the table of contents) when the file is opened; notes are numbered
# through the book, and the two notes with ids -1 and 0 are the separators Word draws above them. (Each
# part's elements are in the order its schema gives: Word refuses a file whose parts are out of order,
# where LibreOffice and pandoc read on.)
SETTINGS = (
    HEAD + f'<w:settings xmlns:w="{W}"><w:defaultTabStop w:val="709"/><w:updateFields w:val="true"/>'
    '<w:footnotePr><w:footnote w:id="-1"/><w:footnote w:id="0"/></w:footnotePr>'
    '<w:compat><w:compatSetting w:name="compatibilityMode" w:uri="http://schemas.microsoft.com/office/word"'
    ' w:val="15"/></w:compat></w:settings>'
)

FOOTNOTES_HEAD = (
    HEAD + f"<w:footnotes {DOCUMENT_NAMESPACES}>"
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:pPr><w:spacing w:after="0" w:line="240" '
    'w:lineRule="auto"/></w:pPr><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:pPr><w:spacing w:after="0" w:line="240" '
    'w:lineRule="auto"/></w:pPr><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>'
)
FOOTNOTES_TAIL = "</w:footnotes>"


# A list's numbering (a bullet, or a pattern of `engine.fancy_lists`, `(a)`) as Word's number format.
_FORMATS = {"1": "decimal", "a": "lowerLetter", "A": "upperLetter", "i": "lowerRoman", "I": "upperRoman"}


def _level(level: int, numbering: str, start: int = 1) -> str:
    """A list's level: numbered as `numbering` says (a bullet's character, or a pattern: `(a)` is `(%1)`)."""
    symbol = next((c for c in numbering if c in _FORMATS), "")
    shown = numbering.replace(symbol, f"%{level + 1}", 1) if symbol else numbering
    look = f'<w:numFmt w:val="{_FORMATS.get(symbol, "bullet")}"/><w:lvlText w:val="{shown}"/>'
    indent = f'<w:pPr><w:ind w:left="{720 * (level + 1)}" w:hanging="360"/></w:pPr>'
    return f'<w:lvl w:ilvl="{level}"><w:start w:val="{start}"/>{look}<w:lvlJc w:val="left"/>{indent}</w:lvl>'


_BULLETS = "".join(_level(n, "•◦▪"[n % 3]) for n in range(9))
_NUMBERS = "".join(_level(n, "1.") for n in range(9))
# Two kinds of list: bullets (num 1, shared by every bullet list) and numbers (one num per list, each
# starting at the number its list starts at; the renderer writes those after NUMBERING_HEAD).
NUMBERING_HEAD = (
    HEAD + f'<w:numbering xmlns:w="{W}">'
    f'<w:abstractNum w:abstractNumId="0"><w:multiLevelType w:val="hybridMultilevel"/>{_BULLETS}'
    "</w:abstractNum>"
    f'<w:abstractNum w:abstractNumId="1"><w:multiLevelType w:val="hybridMultilevel"/>{_NUMBERS}'
    '</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
)
NUMBERING_TAIL = "</w:numbering>"


def numbered_list(num: int, level: int, start: int, numbering: str = "1.") -> str:
    """A numbered list's own numbering: from `start`, and, other than `1.`, its format and marker (`(%1)`)
    at its level."""
    own = "" if numbering == "1." else _level(level, numbering, start)
    return (
        f'<w:num w:numId="{num}"><w:abstractNumId w:val="1"/><w:lvlOverride w:ilvl="{level}">'
        f'<w:startOverride w:val="{start}"/>{own}</w:lvlOverride></w:num>'
    )


def _style(kind: str, sid: str, name: str, body: str, based: str = "", nxt: str = "", extra: str = "") -> str:
    based_on = f'<w:basedOn w:val="{based}"/>' if based else ""
    following = f'<w:next w:val="{nxt}"/>' if nxt else ""
    return (
        f'<w:style w:type="{kind}" w:styleId="{sid}"{extra}><w:name w:val="{name}"/>{based_on}{following}'
        f"<w:qFormat/>{body}</w:style>"
    )


# An aside's paragraphs (engine/divs.py): a rule at their left in the html's colour, on the html's ground.
ASIDE_COLOURS = {
    "Note": "4A6F96",
    "Tip": "2F7A4F",
    "Warning": "A5521B",
    "Caution": "A5521B",
    "Important": "6B46A8",
}


def _aside(name: str, colour: str) -> str:
    border = f'<w:pBdr><w:left w:val="single" w:sz="18" w:space="8" w:color="{colour}"/></w:pBdr>'
    return _style(
        "paragraph", name, name, f'<w:pPr>{border}<w:shd w:val="clear" w:color="auto" w:fill="F2F5F8"/>'
        '<w:ind w:left="284"/></w:pPr>', "BodyText",
    )  # fmt: skip


def _heading(level: int, size: int, page_break: bool) -> str:
    brk = "<w:pageBreakBefore/>" if page_break else ""
    spacing = '<w:spacing w:before="480" w:after="240"/>' if level == 1 else '<w:spacing w:before="240"/>'
    return _style(
        "paragraph",
        f"Heading{level}",
        f"heading {level}",
        f'<w:pPr><w:keepNext/><w:keepLines/>{brk}{spacing}<w:outlineLvl w:val="{level - 1}"/></w:pPr>'
        f'<w:rPr><w:rFonts w:asciiTheme="majorHAnsi" w:hAnsiTheme="majorHAnsi"/><w:b/><w:bCs/>'
        f'<w:sz w:val="{size}"/><w:szCs w:val="{size}"/></w:rPr>',
        "Normal",
        "FirstParagraph",
    )


def styles(language: str, rtl: bool, cjk: bool) -> str:
    """The styles, with the book's language (and its direction) as the document's default."""
    east = f' w:eastAsia="{text(language)}"' if cjk else ""
    bidi_lang = f' w:bidi="{text(language)}"' if rtl else ""
    bidi = "<w:bidi/>" if rtl else ""
    parts = [
        HEAD,
        f'<w:styles xmlns:w="{W}"><w:docDefaults><w:rPrDefault><w:rPr>'
        '<w:rFonts w:asciiTheme="minorHAnsi" w:hAnsiTheme="minorHAnsi" w:eastAsiaTheme="minorEastAsia" '
        'w:cstheme="minorBidi"/><w:sz w:val="24"/><w:szCs w:val="24"/>'
        f'<w:lang w:val="{text(language)}"{east}{bidi_lang}/></w:rPr></w:rPrDefault>'
        f'<w:pPrDefault><w:pPr>{bidi}<w:spacing w:after="120" w:line="276" w:lineRule="auto"/></w:pPr>'
        "</w:pPrDefault></w:docDefaults>",
        _style("paragraph", "Normal", "Normal", "", extra=' w:default="1"'),
        _style(
            "paragraph",
            "BodyText",
            "Body Text",
            '<w:pPr><w:spacing w:before="0" w:after="120"/><w:ind w:firstLine="360"/></w:pPr>',
            "Normal",
        ),
        _style(
            "paragraph",
            "FirstParagraph",
            "First Paragraph",
            '<w:pPr><w:ind w:firstLine="0"/></w:pPr>',
            "BodyText",
            "BodyText",
        ),
        _style(
            "paragraph",
            "Title",
            "Title",
            '<w:pPr><w:spacing w:before="2400" w:after="480"/><w:jc '
            'w:val="center"/></w:pPr><w:rPr><w:rFonts w:asciiTheme="majorHAnsi" w:hAnsiTheme="majorHAnsi"/>'
            '<w:b/><w:bCs/><w:sz w:val="56"/><w:szCs w:val="56"/></w:rPr>',
            "Normal",
            "Subtitle",
        ),
        _style(
            "paragraph",
            "Subtitle",
            "Subtitle",
            '<w:pPr><w:spacing w:after="240"/><w:jc w:val="center"/>'
            '</w:pPr><w:rPr><w:sz w:val="32"/><w:szCs w:val="32"/></w:rPr>',
            "Normal",
            "Normal",
        ),
        _heading(1, 40, True),
        _heading(2, 30, False),
        _heading(3, 26, False),
        _heading(4, 24, False),
        _heading(5, 24, False),
        _heading(6, 24, False),
        _style(
            "paragraph",
            "BlockText",
            "Block Text",
            '<w:pPr><w:spacing w:before="120" w:after="120"/>'
            '<w:ind w:left="567" w:right="567"/></w:pPr><w:rPr><w:i/><w:iCs/></w:rPr>',
            "Normal",
        ),
        _style(
            "paragraph",
            "SourceCode",
            "Source Code",
            '<w:pPr><w:shd w:val="clear" w:color="auto" w:fill="F4F4F4"/><w:spacing w:after="120"/></w:pPr>',
            "Normal",
        ),
        _style(
            "character",
            "VerbatimChar",
            "Verbatim Char",
            '<w:rPr><w:rFonts w:ascii="Consolas" '
            'w:hAnsi="Consolas" w:cs="Courier New"/><w:sz w:val="20"/><w:szCs w:val="20"/></w:rPr>',
        ),
        *word_styles(_style),  # a highlighted token's, pandoc's (KeywordTok...), on VerbatimChar
        _style(
            "paragraph",
            "ListParagraph",
            "List Paragraph",
            '<w:pPr><w:spacing w:after="60"/><w:contextualSpacing/></w:pPr>',
            "Normal",
        ),
        _style(
            "paragraph",
            "Compact",
            "Compact",
            '<w:pPr><w:spacing w:before="36" w:after="36"/></w:pPr>',
            "Normal",
        ),
        _style(
            "paragraph", "Figure", "Figure", '<w:pPr><w:keepNext/><w:jc w:val="center"/></w:pPr>', "Normal"
        ),
        _style(
            "paragraph",
            "Caption",
            "caption",
            '<w:pPr><w:jc w:val="center"/></w:pPr><w:rPr><w:i/><w:iCs/>'
            '<w:sz w:val="20"/><w:szCs w:val="20"/></w:rPr>',
            "Normal",
        ),
        _style("paragraph", "Cover", "Cover", '<w:pPr><w:jc w:val="center"/></w:pPr>', "Normal"),
        # A definition list's term and its definition, pandoc's docx styles.
        _style(
            "paragraph",
            "DefinitionTerm",
            "Definition Term",
            '<w:pPr><w:keepNext/><w:spacing w:after="0"/></w:pPr><w:rPr><w:b/><w:bCs/></w:rPr>',
            "Normal",
            "Definition",
        ),
        *(_aside(name, colour) for name, colour in ASIDE_COLOURS.items()),
        _style("paragraph", "Definition", "Definition", '<w:pPr><w:ind w:left="567"/></w:pPr>', "Normal"),
        _style(
            "paragraph",
            "HorizontalRule",
            "Horizontal Rule",
            '<w:pPr><w:pBdr><w:bottom w:val="single" '
            'w:sz="6" w:space="1" w:color="auto"/></w:pBdr><w:ind w:left="2268" w:right="2268"/></w:pPr>',
            "Normal",
        ),
        _style(
            "paragraph",
            "FootnoteText",
            "footnote text",
            '<w:pPr><w:spacing w:after="0"/></w:pPr><w:rPr><w:sz w:val="20"/><w:szCs w:val="20"/></w:rPr>',
            "Normal",
        ),
        _style(
            "character",
            "FootnoteReference",
            "footnote reference",
            '<w:rPr><w:vertAlign w:val="superscript"/></w:rPr>',
        ),
        _style(
            "character",
            "Hyperlink",
            "Hyperlink",
            '<w:rPr><w:color w:val="0563C1"/><w:u w:val="single"/></w:rPr>',
        ),
        _style(
            "paragraph",
            "TOCHeading",
            "TOC Heading",
            '<w:pPr><w:keepNext/><w:pageBreakBefore/><w:spacing w:before="480" '
            'w:after="240"/></w:pPr><w:rPr><w:b/><w:bCs/><w:sz w:val="32"/><w:szCs w:val="32"/></w:rPr>',
            "Normal",
            "TOC1",
        ),
        *(
            _style(
                "paragraph",
                f"TOC{n}",
                f"toc {n}",
                f'<w:pPr><w:spacing w:after="60"/><w:ind w:left="{(n - 1) * 240}"/></w:pPr>',
                "Normal",
                "Normal",
            )
            for n in (1, 2, 3)
        ),
        _style(
            "table",
            "Table",
            "Table",
            '<w:tblPr><w:tblInd w:w="0" w:type="dxa"/><w:tblBorders>'
            + "".join(
                f'<w:{side} w:val="single" w:sz="4" w:space="0" w:color="999999"/>'
                for side in ("top", "left", "bottom", "right", "insideH", "insideV")
            )
            + '</w:tblBorders><w:tblCellMar><w:left w:w="108" w:type="dxa"/><w:right w:w="108" '
            'w:type="dxa"/></w:tblCellMar></w:tblPr><w:tblStylePr w:type="firstRow"><w:rPr><w:b/><w:bCs/>'
            "</w:rPr></w:tblStylePr>",
        ),
        "</w:styles>",
    ]
    return "".join(parts)


def core(
    title: str,
    authors: tuple[str, ...],
    language: str,
    subjects: tuple[str, ...],
    description: str | None,
    identifier: str,
    modified: float,
) -> str:
    """docProps/core.xml: the metadata Word shows under File > Info, and search tools read."""
    when = datetime.fromtimestamp(modified, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    fields = [
        f"<dc:title>{text(title)}</dc:title>",
        f"<dc:language>{text(language)}</dc:language>",
        f"<dc:identifier>{text(identifier)}</dc:identifier>",
    ]
    if authors:
        fields.append(f"<dc:creator>{text('; '.join(authors))}</dc:creator>")
    if subjects:
        fields.append(f"<dc:subject>{text('; '.join(subjects))}</dc:subject>")
        fields.append(f"<cp:keywords>{text(', '.join(subjects))}</cp:keywords>")
    if description:
        fields.append(f"<dc:description>{text(description)}</dc:description>")
    fields.append(f'<dcterms:created xsi:type="dcterms:W3CDTF">{when}</dcterms:created>')
    fields.append(f'<dcterms:modified xsi:type="dcterms:W3CDTF">{when}</dcterms:modified>')
    return (
        HEAD + '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
        'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"'
        ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">' + "".join(fields) + "</cp:coreProperties>"
    )


def section(rtl: bool) -> str:
    bidi = "<w:bidi/>" if rtl else ""
    return (
        f'<w:sectPr><w:pgSz w:w="{PAGE_W}" w:h="{PAGE_H}"/><w:pgMar w:top="{MARGIN}" w:right="{MARGIN}" '
        f'w:bottom="{MARGIN}" w:left="{MARGIN}" w:header="709" w:footer="709" w:gutter="0"/>{bidi}</w:sectPr>'
    )
