"""Book metadata: bounded and checked fields, a merge patch under If-Match, one revision's metadata per
build, and a language registry that is the IANA registry."""

from __future__ import annotations

from typing import Any

import pytest

from bindery import engine
from bindery.metadata import Metadata, merged
from tests.unit.conftest import Stack
from tests.unit.test_lost_answers import answer_lost

FULL = {
    "authors": ["Ada Lovelace"],
    "language": "pt-br",
    "identifier": "0-306-40615-2",
    "publisher": "Bindery Test Press",
    "description": "A test.",
    "subjects": ["Testing"],
    "published": "2024-02-29",
    "rights": "CC BY 4.0",
}


def _create(stack: Stack, metadata: Any) -> Any:
    return stack.http(
        "POST", "/books", body={"title": "T", "manuscript": "# A\n\ntext\n", "metadata": metadata}
    )


def test_a_book_keeps_its_metadata_checked_and_in_canonical_form(stack: Stack) -> None:
    reply = _create(stack, FULL)
    assert reply.status == 201, reply.body
    shown = reply.body["metadata"]
    # The ISBN-10 is kept as its ISBN-13; the tag in its canonical case.
    assert shown["identifier"] == "9780306406157" and shown["language"] == "pt-BR"
    assert reply.body["identifier"] == "urn:isbn:9780306406157"
    assert {k: shown[k] for k in ("authors", "subjects", "published", "rights")} == {
        "authors": ["Ada Lovelace"], "subjects": ["Testing"], "published": "2024-02-29", "rights": "CC BY 4.0"
    }  # fmt: skip
    plain = stack.create_book()
    got = stack.http("GET", f"/books/{plain}").body
    assert got["metadata"]["language"] == "en" and got["metadata"]["authors"] == []
    assert got["identifier"].startswith("urn:uuid:")
    assert stack.http("GET", f"/books/{plain}").body["identifier"] == got["identifier"]  # stable


@pytest.mark.parametrize(
    ("metadata", "field", "words"),
    [
        ({"identifier": "0-306-40615-3"}, "metadata.identifier", "check digit"),
        ({"identifier": "978-0-306-40615-8"}, "metadata.identifier", "check digit"),
        ({"identifier": "12345"}, "metadata.identifier", "ISBN"),
        ({"language": "xx"}, "metadata.language", "not a language subtag"),
        ({"language": "en-Qwer"}, "metadata.language", "not a script subtag"),
        ({"language": "english"}, "metadata.language", "BCP 47"),
        ({"authors": ["x" * 201]}, "metadata.authors[0]", "1 to 200 characters"),
        ({"authors": ["a"] * 21}, "metadata.authors", "at most 20"),
        ({"authors": "Ada"}, "metadata.authors", "list of strings"),
        ({"subjects": [""]}, "metadata.subjects[0]", "1 to 100"),
        ({"published": "2023-02-29"}, "metadata.published", "not a date"),
        ({"published": "29/02/2024"}, "metadata.published", "YYYY-MM-DD"),
        ({"description": "x" * 5_001}, "metadata.description", "5,000"),
        ({"publisher": 7}, "metadata.publisher", "a string or null"),
        ({"isbn": "x"}, "metadata.isbn", "not a metadata field"),
        # A character an ISBN has no place for is named, never dropped (an outside test's: each was taken
        # as 9780306406157), as is a control character XML allows in a text: DEL, C1, a line in a name.
        ({"identifier": "978-0-306-40615-7\x0b"}, "metadata.identifier", "U+000B is not part of an ISBN"),
        ({"identifier": "978\x1f0306406157"}, "metadata.identifier", "U+001F is not part of an ISBN"),
        ({"identifier": "978\u20280306406157"}, "metadata.identifier", "U+2028 is not part of an ISBN"),
        ({"identifier": "9780306406157\n"}, "metadata.identifier", "U+000A is not part of an ISBN"),
        ({"publisher": "A\x7fB"}, "metadata.publisher", "U+007F is a control character"),
        ({"rights": "A\x85B"}, "metadata.rights", "U+0085 is a control character"),
        ({"description": "A\x9fB"}, "metadata.description", "U+009F is a control character"),
        ({"authors": ["Ada\u2028Lovelace"]}, "metadata.authors", "one line each"),
    ],
)  # fmt: skip
def test_a_bad_value_is_422_naming_the_field_and_the_rule(
    stack: Stack, metadata: dict[str, Any], field: str, words: str
) -> None:
    reply = _create(stack, metadata)
    assert reply.status == 422, reply.body
    error = reply.body["error"]
    assert (error["code"], error["field"]) == ("invalid_metadata", field)
    assert words in error["message"] and field in error["message"]
    book = stack.create_book()
    patched = stack.http("PATCH", f"/books/{book}", body={"metadata": metadata})
    assert (patched.status, patched.body["error"]["field"]) == (422, field)
    assert stack.http("GET", f"/books/{book}").body["revision"] == 1  # nothing written


def test_patch_is_a_merge_patch_under_if_match_and_bumps_the_revision(stack: Stack) -> None:
    book = _create(stack, FULL).body["id"]
    reply = stack.http(
        "PATCH", f"/books/{book}", body={"title": "New", "metadata": {"rights": None, "authors": ["A", "B"]}},
        headers={"If-Match": '"1"'},
    )  # fmt: skip
    assert reply.status == 200 and reply.headers["ETag"] == '"2"', reply.body
    shown = reply.body["metadata"]
    assert reply.body["title"] == "New" and shown["rights"] is None and shown["authors"] == ["A", "B"]
    assert shown["publisher"] == "Bindery Test Press"  # left out: kept
    stale = stack.http(
        "PATCH", f"/books/{book}", body={"metadata": {"rights": "x"}}, headers={"If-Match": '"1"'}
    )
    assert (stale.status, stale.body["error"]["code"], stale.body["error"]["revision"]) == (
        412,
        "revision_mismatch",
        2,
    )
    empty = stack.http("PATCH", f"/books/{book}", body={})
    assert (empty.status, empty.body["error"]["code"]) == (400, "missing_field")
    assert stack.http("GET", f"/books/{book}").body["revision"] == 2


def test_a_patch_whose_answer_is_lost_is_one_revision_not_two(stack: Stack) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http("PATCH", f"/books/{book}", body={"metadata": {"authors": ["Ada"]}})
    assert reply.status == 200 and reply.body["revision"] == 2, reply.body
    assert stack.http("GET", f"/books/{book}").body["revision"] == 2


def test_a_build_uses_one_revisions_metadata_never_a_mix(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = _create(stack, {"authors": ["First Author"]}).body["id"]
    export_id = stack.submit(book, "html").body["id"]
    real = engine.renderer_for("html")

    class EditsMidway:
        def render(self, source: engine.Source, chapters: Any, out: Any) -> engine.Report:
            # The author changes while the build runs.
            edited = stack.http("PATCH", f"/books/{book}", body={"metadata": {"authors": ["Second Author"]}})
            assert edited.status == 200
            return real.render(source, chapters, out)

    monkeypatch.setattr(engine, "renderer_for", lambda fmt: EditsMidway())
    stack.build(book, export_id)
    view = stack.poll(book, export_id).body
    assert (view["built_revision"], view["book_revision"]) == (1, 2)
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None and found[0].path is not None
    page = stack.objects.read_text(found[0].path)
    assert "First Author" in page and "Second Author" not in page


def test_subtags_txt_is_the_registry_langcodes_carries() -> None:
    """bindery/subtags.txt is generated; this fails when it and the registry disagree (regenerate it with
    `python -m bindery_local.subtags > shared/bindery/subtags.txt`)."""
    from importlib.resources import files

    from bindery_local.subtags import table

    assert (files("bindery") / "subtags.txt").read_text(encoding="ascii") == table()


def test_merged_keeps_a_value_it_is_not_given() -> None:
    kept = merged(merged(Metadata(), {"publisher": "P", "language": "ar"}), {"rights": "R"})
    assert (kept.publisher, kept.language, kept.rights, kept.direction) == ("P", "ar", "R", "rtl")
    assert Metadata.from_stored(kept.stored()) == kept and Metadata().stored() is None
