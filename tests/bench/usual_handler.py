"""The usual way of writing Bindery's poll handler, for the cold-start comparison only: Powertools' Tracer,
APIGatewayHttpResolver with (pydantic) validation, the idempotency utility, and boto3 clients built at
import. It reads the export as Bindery's poll does (one TransactGetItems of the book and the export) and
presigns the download. Nothing imports it but the benchmark."""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent
from pydantic import BaseModel

tracer = Tracer(service="bindery", disabled=True)
logger = Logger(service="bindery")
metrics = Metrics(namespace="Bindery", service="bindery")
app = APIGatewayHttpResolver(enable_validation=True)
dynamodb = boto3.client("dynamodb")
s3 = boto3.client("s3")
persistence = DynamoDBPersistenceLayer(table_name="bindery-idempotency")
TABLE, BUCKET = os.environ["BINDERY_TABLE"], os.environ["BINDERY_BUCKET"]


class ExportView(BaseModel):
    id: str
    state: str
    download_url: str | None = None


@app.get("/books/<book_id>/exports/<export_id>")
@tracer.capture_method
def get_export(book_id: str, export_id: str) -> ExportView:
    pk = {"S": f"BOOK#{book_id}"}
    found = dynamodb.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": TABLE, "Key": {"pk": pk, "sk": {"S": "BOOK"}}}},
            {"Get": {"TableName": TABLE, "Key": {"pk": pk, "sk": {"S": f"EXPORT#{export_id}"}}}},
        ]
    )["Responses"]
    export = found[1]["Item"]
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": export["path"]["S"]}, ExpiresIn=900
    )
    return ExportView(id=export_id, state=export["state"]["S"], download_url=url)


@idempotent(persistence_store=persistence)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: object) -> dict:  # type: ignore[type-arg]
    return app.resolve(event, context)  # type: ignore[arg-type]
