"""Build the table and bucket from template.yaml, so that tests and the template cannot drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parent.parent / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (!Ref, !GetAtt, !Sub ...) as plain values."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node)}
    return {suffix: loader.construct_mapping(node)}  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)


def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)


def table_properties() -> dict[str, Any]:
    props: dict[str, Any] = template()["Resources"]["Table"]["Properties"]
    return props


def create_table_kwargs(name: str) -> dict[str, Any]:
    """CreateTable arguments for `name`, taken from the template's Table resource."""
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
    client.create_table(**create_table_kwargs(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    ttl = table_properties()["TimeToLiveSpecification"]
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True}
    )
