"""One fresh process's cold start: import a handler module, then invoke it once with its sample event from
events/ (the handlers build their AWS clients at the first invoke, not at import). Prints seconds.

The floor is the least any Python function that reads DynamoDB does: import boto3, build a client, make
one GetItem. Every call goes to the embedded AWS the bench started (AWS_ENDPOINT_URL)."""

import importlib
import json
import os
import sys
import time
from pathlib import Path


class Context:  # what Powertools reads of a Lambda context
    function_name, memory_limit_in_mb, aws_request_id = "bench", 512, "cold-start"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


started = time.perf_counter()
target, event = sys.argv[1], sys.argv[2]
if target == "floor":
    import boto3

    key = {"pk": {"S": "BOOK#none"}, "sk": {"S": "BOOK"}}
    boto3.client("dynamodb").get_item(TableName=os.environ["BINDERY_TABLE"], Key=key)
else:
    module = importlib.import_module(target)
    module.handler(json.loads(Path(event).read_text()), Context())
print(time.perf_counter() - started)
