"""template.yaml, as the tests read it: the same reader the local stack creates its resources with."""

from bindery_local.template import create_table, create_table_kwargs, load, table_properties

__all__ = ["create_table", "create_table_kwargs", "table_properties", "template"]


def template() -> dict:  # type: ignore[type-arg]
    return load()
