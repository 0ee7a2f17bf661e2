"""Payload serialization: cloudpickle behind a format header."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MalformedPayload, PersistenceError, dumps, loads

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner) | st.tuples(inner, inner),
    max_leaves=20,
)


@given(values)
def test_round_trip(value: object) -> None:
    """Any plain value survives dumps/loads unchanged."""
    assert loads(dumps(value)) == value


def test_lambda_round_trip() -> None:
    """A lambda (cloudpickle's speciality) survives the round trip."""
    offset = 3
    assert loads(dumps(lambda x: x + offset))(4) == 7


def test_header_present() -> None:
    """dumps prefixes the magic and format version."""
    assert dumps(1)[:5] == b"AFp\x00\x01"


@pytest.mark.parametrize("data", [b"", b"AF", b"garbage bytes here", b'{"json": 1}'])
def test_not_a_payload(data: bytes) -> None:
    """Bytes without the header are refused with MalformedPayload."""
    with pytest.raises(MalformedPayload, match="not an actorflow payload"):
        loads(data)


def test_future_format() -> None:
    """A newer format version is refused, telling to upgrade."""
    with pytest.raises(MalformedPayload, match="format 9 is not supported"):
        loads(b"AFp\x00\x09" + dumps(1)[5:])


def test_damaged_body() -> None:
    """A truncated body is reported as damaged."""
    with pytest.raises(MalformedPayload, match="damaged payload"):
        loads(dumps(list(range(100)))[:-10])


def test_not_bytes() -> None:
    """A str is refused, naming its type."""
    with pytest.raises(MalformedPayload, match="must be bytes, got str"):
        loads("AFp")  # type: ignore[arg-type]


def test_unpicklable() -> None:
    """An unpicklable value raises MalformedPayload naming the type, a PersistenceError."""
    with pytest.raises(MalformedPayload, match="lock") as info:
        dumps(threading.Lock())
    assert isinstance(info.value, PersistenceError)
