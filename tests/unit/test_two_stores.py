"""Two Stores on two tables in one process each write their own table: a Store binds its own model classes,
so constructing a second one (a test's, a tool's) cannot redirect the first one's writes. Before, every
Store rebound PynamoDB's classes for the whole process, and the first Store wrote to the second's table."""

from __future__ import annotations

import boto3
from moto import mock_aws

from bindery import wiring
from bindery.api.http import ApiServices
from bindery.config import Settings
from bindery.objects import Objects
from bindery.states import Queue
from bindery.storage import Store
from bindery_local.template import create_table


def _api(name: str) -> tuple[ApiServices, Store]:
    settings = Settings(table=name, bucket=name)
    store = Store(settings)
    return wiring.api(settings, store, Objects(settings)), store


def test_two_stores_on_two_tables_keep_to_their_own() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        services = []
        for name in ("first-table", "second-table"):
            create_table(client, name)
            boto3.client("s3").create_bucket(Bucket=name)
            services.append(_api(name))
        (first, one), (second, two) = services  # the second built after the first, as a rebinding would win
        a, _, _ = first.books.create_book("user-alice", "First", "# One\n\ntext\n")
        b, _, _ = second.books.create_book("user-bob", "Second", "# Two\n\ntext\n")
        first.exports.submit("user-alice", a.id, "html", None)

        def books_in(table: str) -> set[str]:
            items = client.scan(TableName=table)["Items"]
            return {i["pk"]["S"] for i in items if i["sk"]["S"] == "BOOK"}

        assert books_in("first-table") == {f"BOOK#{a.id}"}
        assert books_in("second-table") == {f"BOOK#{b.id}"}
        assert one.books.read_book(b.id) is None and two.books.read_book(a.id) is None
        assert [e.book_id for e in one.exports.all_exports()] == [a.id]
        assert list(two.exports.all_exports()) == []


def test_every_model_of_a_store_talks_through_its_one_client() -> None:
    """PynamoDB keeps a connection per model class; `Models.bound` gives all of a Store's models the same
    one. Call counters and fault hooks hang on `store.client`, so a model that dispatched through a
    client of its own would escape every count and every injected fault: this fails if one does."""
    with mock_aws():
        create_table(boto3.client("dynamodb"), "table")
        boto3.client("s3").create_bucket(Bucket="table")
        api, store = _api("table")
        seen: list[str] = []
        store.client.meta.events.register("before-call.dynamodb", lambda model, **_: seen.append(model.name))
        book, _, _ = api.books.create_book("user-alice", "One", "# One\n\ntext\n")  # book, chapters
        api.exports.submit("user-alice", book.id, "html", None)  # export, live set
        store.books.read_book(book.id)  # the book model
        store.books.read_chapters(book.id, book.cut)  # the chapter model
        list(store.exports.all_exports())  # the export model
        store.sweeps.due(Queue.STALE, 0.0, 10)  # its index
        clients = {id(model._get_connection().connection.client) for model in store.models.__dict__.values()}
    assert clients == {id(store.client)}
    assert {"TransactWriteItems", "BatchWriteItem", "GetItem", "Query", "Scan"} <= set(seen), seen
