"""One fresh process's init: import a handler module (and build what it builds at import). Prints seconds."""

import sys
import time

started = time.perf_counter()
target = sys.argv[1]
if target == "floor":
    import boto3

    boto3.client("dynamodb")
else:
    __import__(target)
print(time.perf_counter() - started)
