"""The test books: every format is built from each, and checked by the validators real readers trust."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def _many(chapters: int) -> str:
    return "".join(
        f"# Chapter {n}\n\nThis is chapter {n}. It has *some emphasis* and a number: {n * 7}.\n\n"
        for n in range(1, chapters + 1)
    )


BOOKS: dict[str, str] = {
    "tiny": "# Tiny\n\nOne short chapter.\n",
    "features": (HERE / "features.md").read_text(),
    "scripts": (HERE / "scripts.md").read_text(),
    "many": _many(1_200),
    "empty": "",
    "blank_opening": "   \n\n\t\n# Only Chapter\n\nThe text before the heading was blank.\n",
}

# What each book must show: its chapter titles, and a sample of text from each (non-Latin included).
SAMPLES: dict[str, list[str]] = {
    "tiny": ["Tiny", "One short chapter."],
    "features": ["Every Feature", "A second level", "A third level", "Second Chapter", "The first note."],
    "scripts": [
        "Ελληνικά",
        "Καλημέρα κόσμε",
        "Русский",
        "французских булок",
        "中文与日本語",
        "敏捷的棕色狐狸",
        "العربية",
        "עברית",
        "Emoji",
        "📚",
    ],
    "many": ["Chapter 1", "This is chapter 1.", "Chapter 600", "Chapter 1200", "This is chapter 1200."],
    "blank_opening": ["Only Chapter", "The text before the heading was blank."],
}
