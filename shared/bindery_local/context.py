"""The one stand-in for a Lambda context: what the handlers and Powertools read of it. The local stack, the
CLI's `invoke` and the tests all hand the handlers this."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field


@dataclass
class LambdaContext:
    function_name: str
    timeout_ms: int
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.timeout_ms - int((time.monotonic() - self.started) * 1000))
