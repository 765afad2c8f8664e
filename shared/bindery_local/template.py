"""template.yaml as data: the one definition of the table, queues, routes and schedules."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (!Ref, !GetAtt, !Sub ...) as {"Ref": ...}-style values."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        return {name: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {name: loader.construct_sequence(node)}
    return {name: loader.construct_mapping(node)}


_CfnLoader.add_multi_constructor("!", _tag)


@lru_cache(maxsize=4)
def load(path: str | None = None) -> dict[str, Any]:
    source = Path(path or os.environ.get("BINDERY_TEMPLATE") or DEFAULT_PATH)
    loaded: dict[str, Any] = yaml.load(source.read_text(), Loader=_CfnLoader)
    return loaded


def resources() -> dict[str, Any]:
    found: dict[str, Any] = load()["Resources"]
    return found


def table_properties() -> dict[str, Any]:
    props: dict[str, Any] = resources()["Table"]["Properties"]
    return props


def create_table_kwargs(name: str) -> dict[str, Any]:
    props = table_properties()
    return {
        "TableName": name,
        "BillingMode": props["BillingMode"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "GlobalSecondaryIndexes": props["GlobalSecondaryIndexes"],
        "StreamSpecification": {"StreamEnabled": True, **props["StreamSpecification"]},
    }


def create_table(client: Any, name: str) -> None:
    """Create `name` as template.yaml defines Table, TTL included."""
    client.create_table(**create_table_kwargs(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    ttl = table_properties()["TimeToLiveSpecification"]
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True}
    )


def queue_attributes(logical_id: str) -> dict[str, str]:
    """SQS CreateQueue attributes for a queue resource, minus what only AWS has (SSE, redrive ARNs)."""
    props = resources()[logical_id]["Properties"]
    attrs = {}
    for key in ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds"):
        if key in props:
            attrs[key] = str(props[key])
    return attrs


def memory_gb(logical_id: str) -> float:
    """A function's configured memory in GB (Lambda bills GB-seconds), its own or the Globals' default."""
    own = resources()[logical_id]["Properties"].get("MemorySize")
    return int(own or load()["Globals"]["Function"]["MemorySize"]) / 1024


def max_receive_count(logical_id: str) -> int:
    return int(resources()[logical_id]["Properties"]["RedrivePolicy"]["maxReceiveCount"])


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # as API Gateway writes it: /books/{bookId}/exports
    function: str  # the folder under functions/

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method != self.method:
            return None
        # {name} is one segment; {name+}, API Gateway's greedy form, is the rest of the path.
        pattern = re.sub(r"\\\{(\w+)\\\+\\\}", r"(?P<\1>.+)", re.escape(self.path))
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", pattern) + "$"
        found = re.match(pattern, path)
        return found.groupdict() if found else None


def _function_dir(props: dict[str, Any]) -> str:
    return str(props["CodeUri"]).strip("/").split("/")[-1]


def functions() -> list[str]:
    """Every function's folder under functions/."""
    return [
        _function_dir(r["Properties"])
        for r in resources().values()
        if r.get("Type") == "AWS::Serverless::Function"
    ]


def _at_default(value: Any) -> Any:
    """A property's value as the template's defaults make it: a `!Ref` to a parameter is its Default, and an
    `!If` on a condition that holds at the defaults (ReserveSubmit) is its first branch."""
    if isinstance(value, dict) and "Ref" in value:
        return load()["Parameters"][value["Ref"]]["Default"]
    if isinstance(value, dict) and "Fn::If" in value:
        return _at_default(value["Fn::If"][1])
    return value


def concurrency_caps() -> dict[str, int]:
    """The most instances the template lets each function run at once, where it caps them: a function's
    ReservedConcurrentExecutions, or its SQS event source's MaximumConcurrency, at their defaults."""
    caps: dict[str, int] = {}
    for resource in resources().values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        found = [_at_default(props.get("ReservedConcurrentExecutions"))]
        for event in props.get("Events", {}).values():
            found.append(_at_default(event["Properties"].get("ScalingConfig", {}).get("MaximumConcurrency")))
        if numbers := [int(n) for n in found if n is not None]:
            caps[_function_dir(props)] = min(numbers)
    return caps


def pipe_stream_parameters(logical_id: str) -> dict[str, Any]:
    """A pipe's DynamoDBStreamParameters: its StartingPosition and BatchSize."""
    params: dict[str, Any] = resources()[logical_id]["Properties"]["SourceParameters"][
        "DynamoDBStreamParameters"
    ]
    return params


def _events(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(function folder, event properties) for every event of `kind` on a function in the template."""
    for resource in resources().values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        for event in props.get("Events", {}).values():
            if event["Type"] == kind:
                yield _function_dir(props), event["Properties"]


def routes() -> list[Route]:
    return [Route(event["Method"], event["Path"], function) for function, event in _events("HttpApi")]


@dataclass(frozen=True)
class Schedule:
    function: str
    seconds: int


def schedules() -> list[Schedule]:
    units = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
    found = []
    for function, event in _events("Schedule"):
        rate = re.fullmatch(r"rate\((\d+) (\w+)\)", event["Schedule"])
        if rate is None:
            raise ValueError(f"{function}: only rate(...) schedules run locally, not {event['Schedule']}")
        found.append(Schedule(function, int(rate.group(1)) * units[rate.group(2)]))
    return found


@dataclass(frozen=True)
class Consumer:
    """An SQS event source mapping: the queue, the function it feeds, and how many messages at a time."""

    queue: str  # the queue's logical id
    function: str  # the folder under functions/
    batch_size: int


def _arn_of(value: Any) -> str:
    """The logical id a `!GetAtt X.Arn` names."""
    target = value["Fn::GetAtt"]
    name = target if isinstance(target, str) else ".".join(target)
    return str(name.removesuffix(".Arn"))


def queue_consumers() -> list[Consumer]:
    """Every function an SQS queue feeds, with its queue and batch size (SQS's default batch is 10)."""
    return [
        Consumer(_arn_of(event["Queue"]), function, int(event.get("BatchSize", 10)))
        for function, event in _events("SQS")
    ]


def queue_consumer(queue_logical_id: str) -> tuple[str, int]:
    """(function folder, batch size) of the function the queue feeds."""
    for consumer in queue_consumers():
        if consumer.queue == queue_logical_id:
            return consumer.function, consumer.batch_size
    raise LookupError(f"no function consumes {queue_logical_id}")


def queues() -> list[str]:
    """Every SQS queue's logical id, each dead-letter queue before the queues that redrive into it."""
    found = [name for name, r in resources().items() if r.get("Type") == "AWS::SQS::Queue"]
    return sorted(found, key=lambda name: dead_letter_queue(name) is not None)


def dead_letter_queue(logical_id: str) -> str | None:
    """The logical id of the queue's dead-letter queue, or None if it redrives nowhere."""
    redrive = resources()[logical_id]["Properties"].get("RedrivePolicy")
    return _arn_of(redrive["deadLetterTargetArn"]) if redrive else None


def queue_environment() -> dict[str, str]:
    """Each environment variable (the Globals' and every function's) whose value is a queue's URL, and that
    queue's logical id. Every handler runs in one process locally, so each is set once, for all."""
    found: dict[str, str] = {}
    scopes = [load()["Globals"]["Function"], *(
        r["Properties"] for r in resources().values() if r.get("Type") == "AWS::Serverless::Function"
    )]  # fmt: skip
    for scope in scopes:
        for key, value in scope.get("Environment", {}).get("Variables", {}).items():
            ref = value.get("Ref") if isinstance(value, dict) else None
            if ref in resources() and resources()[ref]["Type"] == "AWS::SQS::Queue":
                found[key] = ref
    return found


@dataclass(frozen=True)
class Rule:
    """An EventBridge rule on the stack's bus whose targets are queues: what it matches, where it sends."""

    name: str  # the logical id
    pattern: dict[str, Any]
    targets: dict[str, str]  # target id -> the queue's logical id


def bus_rules() -> list[Rule]:
    """The template's rules on its one bus. A rule on any other bus, or one with a target that is not one
    of the template's queues, has no local counterpart and is refused rather than skipped."""
    found = []
    for name, resource in resources().items():
        if resource.get("Type") != "AWS::Events::Rule":
            continue
        props = resource["Properties"]
        if props.get("EventBusName") != {"Ref": "EventBus"} or "EventPattern" not in props:
            raise ValueError(f"{name}: only pattern rules on EventBus run locally")
        targets = {t["Id"]: _arn_of(t["Arn"]) for t in props["Targets"]}
        if any(resources()[q]["Type"] != "AWS::SQS::Queue" for q in targets.values()):
            raise ValueError(f"{name}: only queue targets run locally")
        found.append(Rule(name, props["EventPattern"], targets))
    return found


def pipe_filters(logical_id: str) -> list[dict[str, Any]]:
    """A pipe's filter patterns: a record passes when any one matches."""
    import json

    props = resources()[logical_id]["Properties"]
    return [json.loads(f["Pattern"]) for f in props["SourceParameters"]["FilterCriteria"]["Filters"]]


def pipe_target_parameters(logical_id: str) -> dict[str, Any]:
    params: dict[str, Any] = resources()[logical_id]["Properties"].get("TargetParameters", {})
    return params


_PLACEHOLDER = re.compile(r"<(\$[.\w\[\]*-]*)>")


def json_path(record: Any, path: str) -> Any:
    """The value at a Pipes JSON path ($.a.b), or None where there is none."""
    value = record
    for part in path.removeprefix("$").strip(".").split("."):
        if not part:
            continue
        value = value.get(part) if isinstance(value, dict) else None
    return value


def render_input_template(template: str, record: Any) -> str:
    """A Pipes input template filled from a record, the way Pipes fills it: each <$.path> becomes the value
    there (a missing one becomes nothing)."""
    return _PLACEHOLDER.sub(lambda m: str(json_path(record, m.group(1)) or ""), template)


def matches_any(patterns: list[dict[str, Any]], value: Any) -> bool:
    return any(matches(p, value) for p in patterns)


def global_environment() -> dict[str, str]:
    """The literal values of Globals.Function.Environment (references are the local stack's to fill)."""
    variables = load()["Globals"]["Function"]["Environment"]["Variables"]
    return {k: str(v) for k, v in variables.items() if isinstance(v, str | int)}


def matches(pattern: Any, value: Any) -> bool:
    """EventBridge content filtering, for the subset the Pipe's filter uses: nested keys, lists of
    literals, {"prefix": ...} and {"anything-but": [...]}."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            k in value and matches(p, value[k]) for k, p in pattern.items()
        )
    if isinstance(pattern, list):
        return any(
            (
                isinstance(p, dict)
                and "prefix" in p
                and isinstance(value, str)
                and value.startswith(p["prefix"])
            )
            or (isinstance(p, dict) and "anything-but" in p and value not in p["anything-but"])
            or p == value
            for p in pattern
        )
    return bool(pattern == value)
