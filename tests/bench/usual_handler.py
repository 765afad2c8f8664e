"""The usual way of writing Bindery's poll handler, for the cold-start comparison only: Powertools' Tracer,
APIGatewayRestResolver with (pydantic) validation, the idempotency utility, and boto3 resources built at
import. Nothing imports it but the benchmark."""

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent
from pydantic import BaseModel

tracer = Tracer(service="bindery", disabled=True)
logger = Logger(service="bindery")
metrics = Metrics(namespace="Bindery", service="bindery")
app = APIGatewayRestResolver(enable_validation=True)
table = boto3.resource("dynamodb").Table("bindery")
s3 = boto3.client("s3")
persistence = DynamoDBPersistenceLayer(table_name="bindery-idempotency")


class ExportRequest(BaseModel):
    format: str


@app.get("/books/<book_id>/exports/<export_id>")
@tracer.capture_method
def get_export(book_id: str, export_id: str) -> dict[str, str]:
    return {"id": export_id}


@idempotent(persistence_store=persistence)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: object) -> dict:  # type: ignore[type-arg]
    return app.resolve(event, context)  # type: ignore[arg-type]
