"""Two Stores on two tables in one process each write their own table: a Store binds its own model classes,
so constructing a second one (a test's, a tool's) cannot redirect the first one's writes. Before, every
Store rebound PynamoDB's classes for the whole process, and the first Store wrote to the second's table."""

from __future__ import annotations

import boto3
from moto import mock_aws

from bindery.config import Settings
from bindery.exports import Exports
from bindery_local.template import create_table


def test_two_stores_on_two_tables_keep_to_their_own() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        services = []
        for name in ("first-table", "second-table"):
            create_table(client, name)
            boto3.client("s3").create_bucket(Bucket=name)
            services.append(Exports.from_settings(Settings(table=name, bucket=name)))
        first, second = services  # the second built after the first, as a rebinding would have it win
        a, _, _ = first.books.create_book("user-alice", "First", "# One\n\ntext\n")
        b, _, _ = second.books.create_book("user-bob", "Second", "# Two\n\ntext\n")
        first.submit("user-alice", a.id, "html", None)

        def books_in(table: str) -> set[str]:
            items = client.scan(TableName=table)["Items"]
            return {i["pk"]["S"] for i in items if i["sk"]["S"] == "BOOK"}

        assert books_in("first-table") == {f"BOOK#{a.id}"}
        assert books_in("second-table") == {f"BOOK#{b.id}"}
        assert first.store.read_book(b.id) is None and second.store.read_book(a.id) is None
        assert [e.book_id for e in first.store.all_exports()] == [a.id]
        assert list(second.store.all_exports()) == []
