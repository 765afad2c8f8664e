"""Typed configuration, read once from the environment.

The domain never calls ``os.environ``: it is handed a :class:`Settings`. Endpoints are not settings of
ours. boto3 and botocore already honour ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``, which is
what points the same handlers at moto's server, DynamoDB Local or AWS.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

from bindery.limits import CallerClass, Limits, LimitsError, class_limits, shard_caps


class ConfigError(ValueError):
    """A setting is present but unusable; the message names it."""


@dataclass(frozen=True)
class Settings:
    table: str = "bindery"
    bucket: str = "bindery-artifacts"
    queue_url: str = ""
    region: str = "us-east-1"
    # The build worker's Lambda timeout. A lease outlives it by `lease_margin_seconds`, so a lease that
    # has run out belongs to a process the platform has already killed.
    worker_timeout_seconds: int = 300
    lease_margin_seconds: int = 30
    # How long after a lease runs out a redelivered message still gets to claim the retry before the
    # stale sweep calls the build lost. It covers the queue's visibility timeout slack.
    retry_grace_seconds: int = 120
    max_attempts: int = 3
    link_ttl_seconds: int = 86_400
    presign_max_seconds: int = 900
    queue_grace_seconds: int = 1_800
    # The build queue's VisibilityTimeout (template.yaml; a test holds the two equal): when a message whose
    # build died comes back. The graces above must outlast it (`_check_together`).
    build_visibility_timeout_seconds: int = 360
    # The standard class's live exports; every class's caps are in `bindery.limits`, overridden by
    # `class_limits` (BINDERY_CLASS_LIMITS, JSON).
    max_live_exports: int = 10
    class_limits: str = ""
    # Pending exports across every caller at once, single or in a batch.
    max_live_exports_total: int = 1_000
    idempotency_ttl_seconds: int = 86_400
    ended_retention_seconds: int = 30 * 86_400
    sweep_batch: int = 100
    # Artifact keys the orphan reconciliation reads per GC run; the cursor carries the rest to the next run.
    reconcile_batch: int = 1000
    max_manuscript_bytes: int = 5 * 1024 * 1024
    # The cache of built pieces (`bindery.piece_cache`): "on" or "off"; the most it keeps of one book, all
    # its formats together, in bytes (a build of one format keeps its share); and how long a piece lives.
    piece_cache: str = "on"
    piece_cache_max_bytes: int = 512 * 1024 * 1024
    piece_cache_max_age_seconds: int = 14 * 86_400
    # Webhooks. A delivery's attempts wait these many seconds after the one before (the first: none), each
    # with +-20 % jitter; 8 attempts over about 23.6 hours, inside a window of 24.
    webhook_schedule: str = "0,60,300,1800,7200,18000,28800,28800"
    webhook_window_seconds: int = 86_400
    max_webhooks: int = 10
    # Consecutive failed attempts (over all its deliveries) after which an endpoint is disabled.
    webhook_disable_after: int = 20
    webhook_secret_overlap_seconds: int = 86_400
    # How long one attempt may hold its delivery: the send's deadline and then some.
    webhook_lease_seconds: int = 60
    webhook_send_queue_url: str = ""
    # "1" lets an endpoint be http on 127.0.0.1: only `make run` sets it. Never set it in a deployment.
    webhook_local_http: str = ""

    @property
    def webhook_delays(self) -> tuple[int, ...]:
        try:
            delays = tuple(int(d) for d in self.webhook_schedule.split(","))
        except ValueError:
            raise ConfigError(
                f"BINDERY_WEBHOOK_SCHEDULE must be seconds, comma separated: {self.webhook_schedule!r}"
            ) from None
        if not delays or min(delays) < 0:
            raise ConfigError("BINDERY_WEBHOOK_SCHEDULE must hold at least one delay, none negative")
        return delays

    @cached_property
    def classes(self) -> dict[CallerClass, Limits]:
        try:
            return class_limits(self.class_limits, self.max_live_exports)
        except LimitsError as exc:
            raise ConfigError(str(exc)) from None

    def limits(self, caller_class: CallerClass) -> Limits:
        return self.classes[caller_class]

    @cached_property
    def shard_caps(self) -> tuple[int, ...]:
        return shard_caps(self.max_live_exports_total)

    @property
    def webhook_local(self) -> bool:
        return self.webhook_local_http == "1"

    @property
    def lease_seconds(self) -> int:
        return self.worker_timeout_seconds + self.lease_margin_seconds

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for f in fields(cls):
            name = "BINDERY_" + f.name.upper()
            raw = env.get(name)
            if f.name == "region":
                raw = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
            if raw is None or raw == "":
                continue
            if f.type == "int":
                try:
                    number = int(raw)
                except ValueError:
                    raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
                if number < 1:
                    raise ConfigError(f"{name} must be at least 1, got {number}")
                values[f.name] = number
            else:
                values[f.name] = raw
        read = cls(**values)  # type: ignore[arg-type]
        if read.piece_cache not in ("on", "off"):
            raise ConfigError(f"BINDERY_PIECE_CACHE must be on or off, got {read.piece_cache!r}")
        read.webhook_delays  # noqa: B018 - a schedule that does not parse is refused here, at start
        read.classes  # noqa: B018 - and so are class limits that do not
        read._check_together()
        return read

    def _check_together(self) -> None:
        """Refuse, at start, settings that each parse but contradict each other: a build the queue would
        redeliver must get its redelivery before the stale sweep calls it lost or never started."""
        visibility = (
            f"the build queue's visibility timeout ({self.build_visibility_timeout_seconds} s, "
            "BINDERY_BUILD_VISIBILITY_TIMEOUT_SECONDS)"
        )
        if self.lease_seconds + self.retry_grace_seconds <= self.build_visibility_timeout_seconds:
            raise ConfigError(
                f"BINDERY_RETRY_GRACE_SECONDS ({self.retry_grace_seconds} s) after the lease "
                f"(BINDERY_WORKER_TIMEOUT_SECONDS + BINDERY_LEASE_MARGIN_SECONDS = {self.lease_seconds} s) "
                f"must outlast {visibility}: the stale sweep would end a cut-off build worker_lost before "
                "its redelivery could claim the next attempt"
            )
        if self.piece_cache_max_age_seconds > self.ended_retention_seconds:
            # A deleted book's purge looks for a cache only when an export row of a format that keeps
            # pieces is left: a piece must not outlive every row that says it may exist.
            raise ConfigError(
                f"BINDERY_PIECE_CACHE_MAX_AGE_SECONDS ({self.piece_cache_max_age_seconds} s) must not be "
                f"longer than BINDERY_ENDED_RETENTION_SECONDS ({self.ended_retention_seconds} s)"
            )
        if self.queue_grace_seconds <= self.build_visibility_timeout_seconds:
            raise ConfigError(
                f"BINDERY_QUEUE_GRACE_SECONDS ({self.queue_grace_seconds} s) must be longer than "
                f"{visibility}: an export whose first delivery died before its claim would fail "
                "queue_timeout before its redelivery arrived"
            )


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The process's settings, read on first use rather than at import."""
    return Settings.from_env()
