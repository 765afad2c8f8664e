"""A book's metadata: what a publisher says of it beyond its text. Every field is optional and bounded, and
a bad value is refused with 422, naming the field and the rule it broke, before anything is written.

A patch is a JSON merge patch (RFC 7396) of the metadata: a field it names is replaced, a field it sets to
null is removed, and a field it leaves out is kept.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from bindery import errors
from bindery.characters import describe, first_forbidden
from bindery.language import BadTag, canonical, direction

MAX_AUTHORS, MAX_NAME = 20, 200
MAX_SUBJECTS, MAX_SUBJECT = 20, 100
MAX_PUBLISHER, MAX_RIGHTS, MAX_DESCRIPTION = 200, 1_000, 5_000
MAX_ASSET_NAME = 200
DEFAULT_LANGUAGE = "en"


@dataclass(frozen=True)
class Metadata:
    authors: tuple[str, ...] = ()
    language: str = DEFAULT_LANGUAGE
    identifier: str | None = None  # an ISBN-13, digits only
    publisher: str | None = None
    description: str | None = None
    subjects: tuple[str, ...] = ()
    published: str | None = None  # YYYY-MM-DD
    rights: str | None = None
    cover: str | None = None  # the name of one of the book's image assets

    @property
    def direction(self) -> str:
        return direction(self.language)

    def view(self) -> dict[str, Any]:
        out = asdict(self)
        out["authors"], out["subjects"] = list(self.authors), list(self.subjects)
        return out

    def stored(self) -> str | None:
        """The JSON the book item keeps: only what differs from the defaults, None when nothing does."""
        kept = {k: v for k, v in self.view().items() if v not in (None, [], ()) and k != "language"}
        if self.language != DEFAULT_LANGUAGE:
            kept["language"] = self.language
        return json.dumps(kept, ensure_ascii=False, separators=(",", ":"), sort_keys=True) if kept else None

    @classmethod
    def from_stored(cls, text: str | None) -> Metadata:
        data = json.loads(text) if text else {}
        data["authors"] = tuple(data.get("authors", ()))
        data["subjects"] = tuple(data.get("subjects", ()))
        return cls(**data)


FIELDS = frozenset(Metadata.__dataclass_fields__)


def merged(current: Metadata, patch: Any) -> Metadata:
    """`current` with the merge patch `patch` applied, every value checked."""
    if not isinstance(patch, dict):
        raise errors.Unprocessable(
            "metadata must be a JSON object", code="invalid_metadata", field="metadata"
        )
    unknown = sorted(set(patch) - FIELDS)
    if unknown:
        raise _bad(unknown[0], f"is not a metadata field; the fields are {', '.join(sorted(FIELDS))}")
    values = {**current.view(), **patch}
    return Metadata(
        authors=_names(values["authors"], "authors", MAX_AUTHORS, MAX_NAME),
        language=_language(values["language"]),
        identifier=_isbn(values["identifier"]),
        publisher=_text(values["publisher"], "publisher", MAX_PUBLISHER),
        description=_text(values["description"], "description", MAX_DESCRIPTION),
        subjects=_names(values["subjects"], "subjects", MAX_SUBJECTS, MAX_SUBJECT),
        published=_date(values["published"]),
        rights=_text(values["rights"], "rights", MAX_RIGHTS),
        cover=_text(values["cover"], "cover", MAX_ASSET_NAME),
    )


def _bad(name: str, rule: str, **details: str) -> errors.Unprocessable:
    return errors.Unprocessable(
        f"metadata.{name} {rule}", code="invalid_metadata", field=f"metadata.{name}", **details
    )


def _text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(name, "must be a string or null")
    # A character XML 1.0 forbids would make the package document malformed (bindery.characters). A lone
    # surrogate gets here too: a field inside the metadata object is not one the body's check reads.
    found = first_forbidden(value)
    if found is not None:
        raise _bad(name, f"at character {found.index + 1}: {describe(found)}", code_point=found.code_point)
    given, value = value, value.strip()
    if not value or len(value) > limit:
        raise _bad(name, f"must be 1 to {limit:,} characters")
    # Line breaks (LF) and tabs are a free text's: a description of paragraphs, as pandoc's dc:description.
    # Any other control character XML 1.0 allows (a CR, DEL, the C1 controls) is refused by name, rather than
    # made an LF or dropped behind the caller. Counted in the value as given: its ends, trimmed, are not
    # kept, and hold no refusal.
    start = len(given) - len(given.lstrip())
    index = next((start + n for n, c in enumerate(value) if _control(c) and c not in "\n\t"), None)
    if index is not None:
        code_point = f"U+{ord(given[index]):04X}"
        raise _bad(
            name,
            f"at character {index + 1}: {code_point} is a control character; only a line break (LF) or a tab "
            "may be in a text",
            code_point=code_point,
        )
    return value


def _names(value: Any, name: str, most: int, limit: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise _bad(name, "must be a list of strings")
    if len(value) > most:
        raise _bad(name, f"may hold at most {most} entries")
    out = tuple(_text(v, f"{name}[{n}]", limit) or "" for n, v in enumerate(value))
    if any(not set(v).isdisjoint("\n\u2028\u2029") for v in out):
        raise _bad(name, "entries must be one line each (no LF, U+2028 or U+2029)")
    return out


def _language(value: Any) -> str:
    if value is None:
        return DEFAULT_LANGUAGE
    try:
        return canonical(value)
    except BadTag as exc:
        raise _bad("language", f"must be a BCP 47 language tag: {exc}") from None


def _date(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise _bad("published", "must be a date written YYYY-MM-DD")
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise _bad("published", f"{value!r} is not a date on the calendar") from None


def _isbn(value: Any) -> str | None:
    """An ISBN-10 or ISBN-13, hyphens and spaces allowed, as the 13 digits of its ISBN-13."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 20:
        raise _bad("identifier", "must be an ISBN-10 or ISBN-13 of at most 20 characters")
    # Digits, an X, and hyphens or spaces between them: anything else is refused by name, never dropped.
    index = next((n for n, c in enumerate(value) if c not in "0123456789Xx -"), None)
    if index is not None:
        code_point = f"U+{ord(value[index]):04X}"
        raise _bad(
            "identifier",
            f"at character {index + 1}: {code_point} is not part of an ISBN (digits, the last of ten may "
            "be X, with hyphens or spaces between)",
            code_point=code_point,
        )
    digits = value.replace(" ", "").replace("-", "").upper()
    if re.fullmatch(r"\d{9}[\dX]", digits):
        total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
        if total % 11:
            raise _bad("identifier", f"{value!r} is not an ISBN-10: its check digit is wrong")
        return _isbn13("978" + digits[:9])
    if re.fullmatch(r"97[89]\d{10}", digits):
        if _isbn13(digits[:12]) != digits:
            raise _bad("identifier", f"{value!r} is not an ISBN-13: its check digit is wrong")
        return digits
    raise _bad("identifier", "must be an ISBN: 10 digits (the last may be X), or 13 starting 978 or 979")


def _isbn13(first12: str) -> str:
    total = sum((3 if i % 2 else 1) * int(c) for i, c in enumerate(first12))
    return first12 + str((10 - total % 10) % 10)


def package_identifier(book_id: str, metadata: Metadata) -> str:
    """The book's identifier as a URN: its ISBN when it has one, else a UUID derived from its id, so it is
    the same in every export of every revision."""
    if metadata.identifier is not None:
        return f"urn:isbn:{metadata.identifier}"
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'bindery:book:{book_id}')}"


def _control(char: str) -> bool:
    """A control character: C0, DEL or C1 (Unicode's general category Cc)."""
    return unicodedata.category(char) == "Cc"


MAX_TITLE = 500


def check_title(title: Any) -> None:
    """The title's rules, as a create and an edit check it: 1 to MAX_TITLE characters, none of them a control
    character or one XML 1.0 forbids."""
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise errors.BadRequest(f"title must be 1 to {MAX_TITLE} characters", code="invalid_title")
    # A character XML 1.0 forbids would make every title page malformed (bindery.characters).
    found = first_forbidden(title)
    if found is not None:
        raise errors.BadRequest(
            f"title, character {found.index + 1}: {describe(found)}",
            code="invalid_title",
            field="title",
            code_point=found.code_point,
        )
    # A control character XML 1.0 allows (tab, LF, CR, DEL, C1) is still no part of a title, which is one
    # line of text: every format would have to drop or replace it.
    index = next((n for n, c in enumerate(title) if unicodedata.category(c) == "Cc"), None)
    if index is not None:
        code_point = f"U+{ord(title[index]):04X}"
        raise errors.BadRequest(
            f"title, character {index + 1}: {code_point} is a control character; remove it",
            code="invalid_title",
            field="title",
            code_point=code_point,
        )
