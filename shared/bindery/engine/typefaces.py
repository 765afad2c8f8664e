"""The PDF's fonts beyond Typst's own: which wheels hold them, where pip put them, and which face of Noto
Sans CJK sets a book's Han characters. Nothing here reads a system font.

Libertinus Serif and DejaVu Sans Mono are built into Typst; three pinned wheels add Amiri (`fontpkg_amiri`:
Arabic), Noto Sans CJK (`noto_cjk_sans_otc`: Chinese, Japanese and Korean) and `manimgx_fonts` (Noto Sans
Symbols, Noto Emoji, Noto Sans, and Noto Sans for the scripts of India and South-East Asia, Armenian,
Georgian and Ethiopic)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# The fonts book.typ names, beyond Typst's own: each wheel (pinned in pyproject.toml and requirements.txt,
# so the layer carries the same), the folder in it that holds them, and the files the design's fallback
# lists rely on. Typst reads every font in these folders, so the other scripts manimgx_fonts holds are set
# too. Arabic is Amiri's, a naskh made for books: Noto Sans Arabic draws a letter as a dotless form and its
# dots, and pdftotext (so a screen reader, a search) reads such text back garbled.
FONT_PACKAGES = (
    (
        "fontpkg_amiri",
        "files",
        ("Amiri-Regular.ttf", "Amiri-Bold.ttf", "Amiri-Italic.ttf", "Amiri-BoldItalic.ttf"),
    ),
    ("manimgx_fonts", "", ("NotoSans[wght].ttf", "NotoSansSymbols[wght].ttf", "NotoEmoji[wght].ttf")),
    ("noto_cjk_sans_otc", "", ("NotoSansCJK-Regular.ttc",)),
)


def font_dirs() -> list[Path]:
    """The folders Typst reads the book's fonts from, where pip installed their wheels. A missing one is
    refused by name: Typst would fall back to its own fonts without a word, and Arabic, CJK and emoji would
    not show."""
    dirs, missing = [], []
    for package, folder, names in FONT_PACKAGES:
        # Found, not imported: importing the three packages (and importlib.resources, which reads them)
        # took 25 ms of every cold pdf build, to learn three folder names.
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            missing.append(f"the package {package}")
            continue
        # A wheel installs its files on disk (never zipped), where Typst can read them by path.
        path = Path(next(iter(found.submodule_search_locations))) / folder
        missing += [
            "/".join(filter(None, (package, folder, name))) for name in names if not (path / name).is_file()
        ]
        dirs.append(path)
    if missing:
        raise FileNotFoundError(
            f"the PDF's fonts are missing: {', '.join(missing)} "
            "(pip install -e . installs them; the layer's requirements.txt names them)"
        )
    return dirs


def cjk_face(tag: str) -> str:
    """The face of Noto Sans CJK that writes Han characters as the book's language does (BCP 47 `tag`):
    Japanese, Korean, traditional Chinese (Taiwan; Hong Kong and Macau), and simplified Chinese for the
    rest, the book in another language included."""
    parts = [p.lower() for p in tag.split("-")]
    if parts[0] == "ja":
        return "Noto Sans CJK JP"
    if parts[0] == "ko":
        return "Noto Sans CJK KR"
    if parts[0] == "zh" and ("hk" in parts[1:] or "mo" in parts[1:]):
        return "Noto Sans CJK HK"
    if parts[0] == "zh" and ("hant" in parts[1:] or "tw" in parts[1:]):
        return "Noto Sans CJK TC"
    return "Noto Sans CJK SC"
