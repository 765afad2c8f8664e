"""BCP 47 language tags (RFC 5646): well-formed, and every subtag one the IANA registry knows.

The registry is `subtags.txt` beside this module, generated from it (`bindery_local.subtags`), and read on
the first check, not at import: a cold start that checks no language pays nothing for it.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from importlib.resources import files

MAX_TAG = 35  # RFC 5646 §4.4.1: the longest tag an implementation must be ready to keep
# language[-extlang][-script][-region](-variant)*(-extension)*[-privateuse], as RFC 5646 §2.1 writes it.
_TAG = re.compile(
    r"(?P<language>[a-z]{2,3})(?:-(?P<extlang>[a-z]{3}))?"
    r"(?:-(?P<script>[a-z]{4}))?"
    r"(?:-(?P<region>[a-z]{2}|[0-9]{3}))?"
    r"(?P<variants>(?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*)"
    r"(?P<extensions>(?:-[0-9a-wy-z](?:-[a-z0-9]{2,8})+)*)"
    r"(?:-x(?:-[a-z0-9]{1,8})+)?"
)


class BadTag(ValueError):
    """Why a tag is not one Bindery takes; the message names the part at fault."""


@cache
def _registry() -> dict[str, frozenset[str]]:
    text = (files("bindery") / "subtags.txt").read_text(encoding="ascii")
    kinds = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            kind, *subtags = line.split()
            kinds[kind] = frozenset(subtags)
    return kinds


def canonical(tag: str) -> str:
    """The tag in its canonical case (`zh-Hant-TW`), or BadTag naming what is wrong with it."""
    if not isinstance(tag, str) or not 2 <= len(tag) <= MAX_TAG:
        raise BadTag(f"a language tag is 2 to {MAX_TAG} characters, like en, pt-BR or zh-Hant")
    lower = tag.lower()
    known = _registry()
    if lower in known["grandfathered"]:
        return lower
    found = _TAG.fullmatch(lower)
    if found is None:
        raise BadTag(f"{tag!r} is not a well-formed BCP 47 tag (RFC 5646), like en, pt-BR or zh-Hant")
    parts = [("language", found["language"]), ("extlang", found["extlang"]), ("script", found["script"])]
    parts += [("region", found["region"])]
    parts += [("variant", v) for v in found["variants"].split("-") if v]
    for kind, subtag in parts:
        if subtag is not None and subtag not in known[kind]:
            article = "an" if kind[0] in "aeiou" else "a"
            raise BadTag(f"{tag!r}: {subtag!r} is not {article} {kind} subtag in the IANA language registry")
    variants = [v for v in found["variants"].split("-") if v]
    if len(set(variants)) != len(variants):
        raise BadTag(f"{tag!r} repeats a variant subtag")
    # RFC 5646 §2.1.1: scripts in title case, regions in upper case, and after a singleton all lower case.
    out, extended = [], False
    for n, subtag in enumerate(lower.split("-")):
        extended = extended or len(subtag) == 1
        if n and not extended and len(subtag) == 4:
            subtag = subtag.title()
        elif n and not extended and len(subtag) == 2:
            subtag = subtag.upper()
        out.append(subtag)
    return "-".join(out)


RTL_SCRIPTS = frozenset({"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Mand", "Samr", "Rohg"})
# Languages written right to left when the tag names no script (their Suppress-Script in the registry).
RTL_LANGUAGES = frozenset({"ar", "he", "fa", "ur", "yi", "ps", "sd", "ug", "dv", "ckb", "syr", "arc"})


def direction(tag: str) -> str:
    """ "rtl" or "ltr": the book's base direction, from the script its tag names or implies."""
    subtags = tag.split("-")
    script = next((s for s in subtags[1:] if len(s) == 4 and s.isalpha()), None)
    if script is not None:
        return "rtl" if script.title() in RTL_SCRIPTS else "ltr"
    return "rtl" if subtags[0].lower() in RTL_LANGUAGES else "ltr"


def text_direction(sample: str) -> str:
    """`rtl` when the first strongly directional character is right to left (as dir="auto" reads it)."""
    for ch in sample:
        kind = unicodedata.bidirectional(ch)
        if kind in ("R", "AL"):
            return "rtl"
        if kind == "L":
            return "ltr"
    return "ltr"
