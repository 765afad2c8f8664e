"""Images in a manuscript: `![A map of the coast](images/coast.png)` names one of the book's assets.

Each renderer resolves every image through one :class:`Figures`, which knows the assets of the revision
being built and keeps the build's account: an image whose asset the book does not have is *missing* (the
export is then incomplete, and a poll names the image and its chapter), and an image without alt text is
a *warning*. An image with a scheme (`https:`, `data:`) or a path outside the book stays a link to it:
an export fetches nothing from outside, ever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html import escape
from urllib.parse import unquote

from bindery.images import Asset, Notes

Tag = Callable[[Asset, str], str]  # (the asset, its escaped alt text) -> the markup that shows it


@dataclass
class Figures:
    assets: dict[str, Asset]
    tag: Tag
    chapter: tuple[int, str] = (0, "")
    used: dict[str, Asset] = field(default_factory=dict)
    notes: Notes = field(default_factory=Notes)
    # Every name resolved, found or not: what a chapter's reused piece depends on (`chapter_pieces`).
    named: set[str] = field(default_factory=set)

    def image(self, src: str, alt: str, alt_html: str) -> str:
        found = self.resolve(src, alt)
        if found is None:
            # Not one of the book's: a link to it, labelled with its alt text, never a fetch.
            return f'<a class="image" href="{escape(src)}">[{alt_html or "image"}]</a>'
        if isinstance(found, str):
            return f'<span class="missing-image">[{alt_html or escape(found)}]</span>'
        return self.tag(found, alt_html)

    def unlanded(self, href: str, text: str, line: int | None) -> None:
        """A link to an id no heading of the book has, or to a file it does not hold, left as its text: a
        warning with where it is."""
        ordinal, title = self.chapter
        note = {"code": "link_unlanded", "chapter": ordinal, "chapter_title": title, "href": href[:200]}
        self.notes.warn({**note, "line": line, "text": " ".join(text.split())[:200]})

    def resolve(self, src: str, alt: str) -> Asset | str | None:
        """The asset `src` shows (used, and warned of when its alt text is empty); or the name of one the
        book does not have (missing, in the notes); or None for anything that is not a path in the book."""
        name = _asset_name(src)
        if name is None:
            return None
        asset = self.assets.get(name)
        self.named.add(name)
        ordinal, title = self.chapter
        if asset is None:
            self.notes.miss({"chapter": ordinal, "chapter_title": title, "name": name})
            return name
        if not alt.strip():
            self.notes.warn({"code": "empty_alt", "chapter": ordinal, "name": name})
        self.used.setdefault(name, asset)
        return asset


def _asset_name(src: str) -> str | None:
    """The asset a relative `src` names, or None for anything that is not a path inside the book."""
    if not src or ":" in src.split("/", 1)[0] or src.startswith(("/", "//", "#", "?")):
        return None
    name = unquote(src.split("#", 1)[0].split("?", 1)[0])
    while name.startswith("./"):
        name = name[2:]
    if not name or any(part in ("", ".", "..") for part in name.split("/")):
        return None
    return name


def image_file(asset: Asset) -> str:
    """Where, under the pdf's compile's root, an asset's bytes are written for Typst to read: named by its
    object id, with the extension of its real type (an asset's own name may have none)."""
    return f"img/{asset.file_name}"


def image_bytes(asset: Asset, read: Callable[[Asset], Iterable[bytes]]) -> Iterable[bytes]:
    """An asset's bytes as a package carries them: as read, but a WebP as the PNG of its pixels (epub and
    docx readers need not show WebP)."""
    if asset.content_type != "image/webp":
        return read(asset)
    import io

    from PIL import Image  # the layer carries Pillow for pikepdf; only a WebP in a package needs it

    out = io.BytesIO()
    Image.open(io.BytesIO(b"".join(read(asset)))).save(out, format="PNG")
    return [out.getvalue()]
