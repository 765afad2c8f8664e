"""The one Markdown dialect every format renders: CommonMark, plus tables, strikethrough and footnotes.

Raw HTML in a manuscript is shown as text, never passed through: an export holds the author's words, and
an EPUB must stay well-formed XHTML whatever the manuscript says.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from mdit_py_plugins.footnote import footnote_plugin


def parser(*, xhtml: bool = False) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "xhtmlOut": xhtml, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(footnote_plugin)
    md.add_render_rule("image", _image_as_link)
    return md


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image becomes a link to it, labelled with its alt text: an export fetches nothing at reading
    time, and an EPUB may not name a remote resource it does not carry."""
    token = tokens[idx]
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env)) or "image"
    return f'<a class="image" href="{escapeHtml(token.attrGet("src") or "")}">[{alt}]</a>'


def render(md: MarkdownIt, text: str, doc_id: str) -> str:
    """HTML for one chapter. `doc_id` prefixes footnote ids, so chapters in one page never collide."""
    return md.render(text, {"docId": doc_id})


UNRENDERED = "<p><em>This chapter could not be rendered.</em></p>\n"


def render_chapter(md: MarkdownIt, text: Any, missed: list[Any]) -> str:
    """A chapter's HTML; or, when it cannot be rendered, a note in its place and its name in `missed`.
    One bad chapter must not sink the book."""
    from bindery.engine import skipped

    try:
        return render(md, text.markdown, f"ch{text.ordinal}")
    except Exception as exc:
        missed.append(skipped(text, exc))
        return UNRENDERED
