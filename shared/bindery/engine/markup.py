"""The one Markdown dialect every format renders: CommonMark, plus tables, strikethrough and footnotes.

Raw HTML in a manuscript is shown as text, never passed through: an export holds the author's words, and
an EPUB must stay well-formed XHTML whatever the manuscript says. HTML comments, the author's notes to
themselves, are left out (`bindery.engine.comments`).

Three things are the renderer's, through the env of each chapter's render:
- images, resolved by the build's `Figures` (`bindery.engine.figures`): an asset of the book, shown as the
  format shows it, or a missing one, named in the build's notes;
- headings: each given its id in the book (`bindery.engine.anchors`' `Links`: pandoc's, as the cut found
  them), or in a book without anchors each below the chapter's own an id of its own, `<doc_id>-h<n>`; those
  at ## and ### listed in `env["headings"]`, so a table of contents can reach them;
- internal links (`#id`): written as the format reaches the heading (`Links.target`), or, to an id no
  heading of the book has, left as their text and named in the build's notes (`link_unlanded`).

It is read in work linear in the manuscript, at most a few times what as much prose costs, whatever the
manuscript's shape, and into the tokens markdown-it gives: `parser` installs the rules that make it so,
for blocks (`bindery.engine.block_rules`) and within them (`bindery.engine.inline_rules`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin

from bindery.engine import (
    bare_urls,
    block_rules,
    comments,
    crossrefs,
    deflists,
    divs,
    fancy_lists,
    formulas,
    headings,
    highlighting,
    inline_html,
    inline_rules,
    interruptions,
    line_blocks,
    pandoc_tables,
    scripts,
    spans,
    tasks,
    typography,
)
from bindery.engine.anchors import Links, link_words
from bindery.engine.figures import Figures

# Bump on any change to what this module renders: built pieces of chapters are keyed by it.
VERSION = 14
UNRENDERED = "<p><em>This chapter could not be rendered.</em></p>\n"


@dataclass(frozen=True)
class Heading:
    level: int  # 2 to 6 (a level-1 heading inside a chapter stands under its title, at 2)
    title: str
    anchor: str
    listed: bool = True  # in the contents: not `.unlisted`, nor under a heading that is (`headings`)


@dataclass
class Rendered:
    html: str
    headings: list[Heading] = field(default_factory=list)
    math: bool = False  # whether it holds MathML (an epub's page says so)
    listed: bool = True  # whether the contents list the chapter: its title is not `.unlisted`


def parser(*, xhtml: bool = False) -> MarkdownIt:
    options = {"html": False, "xhtmlOut": xhtml, "typographer": False, "highlight": highlighting.html}
    md = MarkdownIt("commonmark", options)
    md.enable(["table", "strikethrough"])
    pandoc_tables.install(md)  # pandoc's simple, multiline and grid tables
    md.use(footnote_plugin)
    deflists.install(md)
    divs.install(md)  # pandoc's definition lists: `Term` then `:   its definition`
    dialect(md)
    block_rules.install(md)
    inline_rules.install(md)
    md.add_render_rule("image", _image)
    md.add_render_rule("heading_open", _heading_open)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("crossref", _crossref)
    md.add_render_rule("figure_open", _figure_open)
    md.add_render_rule("figure_close", _figure_close)
    md.add_render_rule("table_open", _table_open)
    md.add_render_rule("span_open", _span_open)
    md.add_render_rule("div_open", _div_open)
    md.add_render_rule("paragraph_open", _paragraph_open)
    return md


def dialect(md: MarkdownIt) -> None:
    """The rules that make what the dialect reads differ from CommonMark's (the block and inline rules
    `parser` installs after them read the same, in linear work): comments left out, headings' attributes,
    and each internal link's line."""
    comments.install(md)
    interruptions.install(md)  # what may interrupt a paragraph, as pandoc reads it
    fancy_lists.install(md)  # pandoc's `a.`, `(iii)`, `#.` lists
    headings.install(md)
    crossrefs.install(md)
    spans.install(md)
    scripts.install(md)
    formulas.install(md)
    tasks.install(md)
    line_blocks.install(md)
    bare_urls.install(md)
    inline_html.install(md)
    typography.install(md)
    md.core.ruler.push("link_lines", _link_lines)
    md.core.ruler.push("note_headings", _note_headings)


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = token.attrGet("src") or ""
    figures: Figures | None = env.get("figures")
    if figures is None:
        # No build's figures (a renderer test, say): a link to the image, labelled with its alt text.
        return f'<a class="image" href="{escape(src)}">[{escape(alt) or "image"}]</a>'
    return figures.image(src, alt, escape(alt))


def _heading_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    level = int(token.tag[1])
    links: Links | None = env.get("links")
    given = links.next_id() if links is not None and not token.meta.get("in_note") else None
    if given is not None:
        token.attrSet("id", given)
    if idx > 0 or level > 1:  # not the chapter's own title
        headings: list[Heading] = env.setdefault("headings", [])
        anchor = given or f"{env.get('docId', 'doc')}-h{len(headings) + 1}"
        title = self.renderInlineAsText(tokens[idx + 1].children or [], options, env)
        headings.append(Heading(max(level, 2), title, anchor, not token.meta.get("unlisted")))
        token.attrSet("id", anchor)
    elif token.meta.get("unlisted"):
        env["unlisted"] = True
    return str(self.renderToken(tokens, idx, options, env))


def _note_headings(state: Any) -> None:
    """A heading inside a note is the note's: no anchor of the book (the cut counts none there), so it
    takes no id of the book's."""
    if "[^" not in state.src:
        return
    inside = False
    for token in state.tokens:
        if token.type in ("footnote_block_open", "footnote_block_close"):
            inside = token.type == "footnote_block_open"
        elif inside and token.type == "heading_open":
            token.meta["in_note"] = True


def _link_lines(state: Any) -> None:
    """Each link's, cross-reference's and formula's line in the chapter (its paragraph's first, and the
    line breaks before it), for the note one that lands nowhere (or does not convert) gets."""
    if "[" not in state.src and "@" not in state.src and "$" not in state.src:
        return
    for token in state.tokens:
        if token.type != "inline" or not token.map or not any(mark in token.content for mark in "[@$"):
            continue
        line = token.map[0] + 1
        for child in token.children or ():
            if child.type in ("softbreak", "hardbreak"):
                line += 1
            elif child.type in ("link_open", "crossref", *formulas.KINDS):
                child.meta["line"] = line


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    links: Links | None = env.get("links")
    if links is not None:
        target = links.resolve(href)
        if target is None:
            # No heading of the book has the id, or it names a file: the link is its text, and in the notes.
            env["unlanded"] = True
            figures: Figures | None = env.get("figures")
            if figures is not None:
                figures.unlanded(href, link_words(tokens, idx), token.meta.get("line"))
            return ""
        token.attrSet("href", target)
    return str(self.renderToken(tokens, idx, options, env))


def _crossref(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """`@fig-map`: "Figure 3", a link to it; one to an id the book does not number, Quarto's `?@fig-map`,
    and a warning."""
    token = tokens[idx]
    links: Links | None = env.get("links")
    target_id = token.meta["id"]
    number = links.number(target_id) if links is not None else None
    href = links.target(target_id) if links is not None and number is not None else None
    if number is None or href is None:
        figures: Figures | None = env.get("figures")
        if figures is not None and links is not None:
            figures.unlanded(f"@{target_id}", token.content, token.meta.get("line"))
        return escape(f"?@{target_id}")
    shown = crossrefs.label(crossrefs.kind_of(target_id) or "", number, token.meta["bare"])
    return f'<a href="{escape(href)}">{escape(shown)}</a>'


def _figure_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A figure, with its id where the book numbers it (the first of that id: no page holds one twice)."""
    token = tokens[idx]
    links: Links | None = env.get("links")
    number = links.caption(token.meta["id"]) if links is not None else None
    tokens[idx + 2].meta["number"] = number  # (its close: a figure holds one inline token)
    return f'<figure id="{escape(token.meta["id"])}">\n' if number else "<figure>\n"


def _figure_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """The figure's caption: its number, and the image's alt text."""
    token = tokens[idx]
    number = token.meta.get("number")
    alt = escape(self.renderInlineAsText(token.meta["image"].children or [], options, env))
    said = f"{crossrefs.label('fig', number)}: {alt}" if number else alt
    return f"<figcaption>{said}</figcaption>\n</figure>\n"


def _table_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A table, and its caption (`: Lights of the coast {#tbl-lights}`), numbered where the book numbers
    it (the first table of that id: no page holds one twice; any other is set without it)."""
    token = tokens[idx]
    caption = token.meta.get("caption")
    if caption is None:
        return str(self.renderToken(tokens, idx, options, env))
    links: Links | None = env.get("links")
    table_id = str(token.attrGet("id") or "")
    number = links.caption(table_id) if links is not None and table_id else None
    if number is None and table_id:
        del token.attrs["id"]
    opened = str(self.renderToken(tokens, idx, options, env))
    said = self.renderInline(caption, options, env)
    return f"{opened}<caption>{crossrefs.label('tbl', number) + ': ' if number else ''}{said}</caption>\n"


def _div_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A fenced div: its id, where the book's index holds it (`divs.targets`), and its classes; an aside
    (`divs.ASIDES`) is a note to the text around it, as ARIA says."""
    token = tokens[idx]
    links: Links | None = env.get("links")
    div_id = token.meta.get("id")
    owned = spans.claimable(div_id) and (links is None or links.owns(div_id))
    named = f' id="{escape(div_id)}"' if owned else ""
    classes = escape(str(token.attrGet("class") or ""))
    named += f' class="{classes}"' if classes else ""
    named += ' role="note"' if divs.aside(token) else ""
    return f"<div{named}>\n"


def _paragraph_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A paragraph; a tight definition's later one (`deflists`: pandoc's Plain after Plain) on a line of its
    own, never run into the words before it."""
    if tokens[idx].hidden and idx and tokens[idx - 1].type == "paragraph_close" and tokens[idx - 1].hidden:
        return "\n"
    return str(self.renderToken(tokens, idx, options, env))


def _span_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    links: Links | None = env.get("links")
    span_id = token.meta.get("id")
    owned = spans.claimable(span_id) and (links is None or links.owns(span_id))
    return f"<span{spans.html_attributes(token, owned)}>"


def _link_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    if env.pop("unlanded", False):
        return ""
    return str(self.renderToken(tokens, idx, options, env))


def render(
    md: MarkdownIt, text: str, doc_id: str, figures: Figures | None = None, links: Links | None = None
) -> Rendered:
    """HTML for one chapter. `doc_id` prefixes footnote ids (and, in a book without anchors, heading ids),
    so chapters in one page never collide."""
    env: dict[str, Any] = {"docId": doc_id, "figures": figures, "links": links}
    if links is not None:
        env["references"] = links.labels  # the book's definitions and headings, wherever they are
    html = md.render(links.with_notes(text) if links is not None else text, env)
    return Rendered(html, env.get("headings", []), env.get("math", False), not env.get("unlisted"))


def render_chapter(
    md: MarkdownIt, text: Any, missed: list[Any], figures: Figures | None = None, links: Links | None = None
) -> Rendered:
    """A chapter's HTML; or, when it cannot be rendered, a note in its place and its name in `missed`.
    One bad chapter must not sink the book."""
    from bindery.engine import skipped

    if figures is not None:
        figures.chapter = (text.ordinal, text.title)
    markdown = text.markdown  # read here, outside the skip: a failed read of the text fails the build
    try:
        return render(md, markdown, f"ch{text.ordinal}", figures, links)
    except Exception as exc:
        missed.append(skipped(text, exc))
        return Rendered(UNRENDERED)


def with_note_roles(md: MarkdownIt) -> MarkdownIt:
    """Footnotes with the EPUB structural semantics and the DPUB-ARIA roles that match them, as EPUB
    Accessibility asks: the references are noterefs, the list is the chapter's endnotes."""
    marked = {
        "footnote_ref": ("<a href=", '<a epub:type="noteref" role="doc-noteref" href='),
        "footnote_block_open": (
            '<section class="footnotes">',
            '<section class="footnotes" epub:type="endnotes" role="doc-endnotes">',
        ),
        "footnote_anchor": ("<a href=", '<a role="doc-backlink" href='),
    }
    for name, (plain, semantic) in marked.items():
        md.add_render_rule(name, _marked(md.renderer.rules[name], plain, semantic))  # type: ignore[attr-defined]
    return md


def _marked(rule: Any, plain: str, semantic: str) -> Any:
    def marked(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return str(rule(tokens, idx, options, env)).replace(plain, semantic, 1)

    return marked


def contents(
    chapters: list[tuple[str, str, list[Heading]]],
    depth: int,
    page: Callable[[str], str],
    *,
    every_level: bool = False,
) -> str:
    """A table of contents as nested lists: each chapter (href, title, headings), and to `depth` its
    headings, each under the last heading before it of a level above its own, linked as
    `page(chapter href)#anchor`. `every_level`: the headings below `depth` too, in lists `hidden` (an
    EPUB navigation document's: a reading system's own contents shows them, its page of contents not)."""
    items = []
    for href, title, below in chapters:
        at = page(href)
        shown = [h for h in below if h.listed and h.title.strip() and (every_level or h.level <= depth)]
        items.append(f'<li><a href="{href}">{escape(title)}</a>{_nested(shown, at, depth, 1)}</li>')
    return f"<ol>{''.join(items)}</ol>"


def _nested(headings: list[Heading], at: str, depth: int, level: int) -> str:
    """`headings` as a list at `level` of the contents (a chapter is 1): each holds the headings after it
    of a level above its own, up to the next of its level or above. Hidden below `depth`."""
    if not headings:
        return ""
    items, i = [], 0
    while i < len(headings):
        head, j = headings[i], i + 1
        while j < len(headings) and headings[j].level > head.level:
            j += 1
        link = f'<a href="{escape(at)}#{escape(head.anchor)}">{escape(head.title)}</a>'
        items.append(f"<li>{link}{_nested(headings[i + 1 : j], at, depth, level + 1)}</li>")
        i = j
    hidden = ' hidden="hidden"' if level >= depth else ""
    return f"<ol{hidden}>{''.join(items)}</ol>"
