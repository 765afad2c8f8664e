"""What a caller's id or Idempotency-Key may be, to its last character: a pattern that stops at `$` lets a
string with a trailing newline through (`re.match(r"^x$", "x\n")` matches), so each is matched whole."""

from __future__ import annotations

import pytest

from bindery import errors
from bindery.idempotency import idempotency_for
from bindery.ids import new_id, valid_export_id, valid_id


def test_an_id_with_a_trailing_newline_names_nothing() -> None:
    made = new_id(1.8e9, shard=3)
    assert valid_id(made) and valid_export_id(made)  # the same id without its newline is one
    assert not valid_id(made + "\n")
    assert not valid_export_id(made + "\n")


@pytest.mark.parametrize("key", ["key\n", "a" * 255 + "\n"])
def test_an_idempotency_key_with_a_trailing_newline_is_refused(key: str) -> None:
    idempotency_for("user-alice", key.rstrip("\n"), [])  # the same key without its newline is taken
    with pytest.raises(errors.BadRequest) as refused:
        idempotency_for("user-alice", key, [])
    assert refused.value.code == "invalid_idempotency_key"
