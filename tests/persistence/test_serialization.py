"""Payload serialization: pickle (the C pickler for plain data, else cloudpickle) behind a header."""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MalformedPayload, PersistenceError, dumps, is_plain, loads, register_plain

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner) | st.tuples(inner, inner),
    max_leaves=20,
)


@given(values)
def test_round_trip(value: object) -> None:
    """Any plain value survives dumps/loads unchanged."""
    assert loads(dumps(value)) == value


@given(values)
def test_plain_values_take_the_fast_path_with_cloudpickles_bytes(value: object) -> None:
    """Plain data is pickled by the standard pickler, and the bytes are exactly cloudpickle's."""
    assert is_plain(value)
    assert dumps(value)[5:] == cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


@register_plain
@dataclass
class _Record:
    name: str
    items: list


def test_registered_records_are_plain_only_with_plain_fields() -> None:
    """A registered record is plain when its attributes are; one holding a lambda is not."""
    assert is_plain({"r": _Record("a", [1, (2, b"x")])})
    odd = _Record("b", [lambda: 1])
    assert not is_plain(odd)
    assert loads(dumps(odd)).items[0]() == 1


def test_values_cloudpickle_must_carry_by_value_still_round_trip() -> None:
    """A class made inside a function (not importable by name) is not plain and goes by value."""

    class Local:
        def __init__(self, v: int) -> None:
            self.v = v

    assert not is_plain(Local(1))
    assert loads(dumps([Local(5)]))[0].v == 5


def test_big_values_beyond_the_walk_budget_round_trip() -> None:
    """Past the walk's budget a value is left to cloudpickle, with the same result."""
    big = [[i, str(i)] for i in range(5_000)]
    assert not is_plain(big)
    assert loads(dumps(big)) == big


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


class _RefusesRestore:
    """Pickles; its own __setstate__ raises when it is loaded."""

    def __init__(self) -> None:
        self.kept = 1

    def __setstate__(self, state: object) -> None:
        raise ValueError("cannot restore this one")


def test_a_restore_that_raises_in_the_application_s_code_names_that_code() -> None:
    """A payload whose class's own __setstate__ raises is not called damaged (it said the bytes
    were changed after dumps() wrote them): the message names the method, its file and line,
    and the error."""
    data = dumps(_RefusesRestore())
    with pytest.raises(MalformedPayload) as info:
        loads(data)
    message = str(info.value)
    assert "damaged" not in message
    assert "restoring it ran _RefusesRestore.__setstate__ (test_serialization.py:" in message
    assert "which raised ValueError: cannot restore this one; fix that code" in message


def test_not_bytes() -> None:
    """A str is refused, naming its type."""
    with pytest.raises(MalformedPayload, match="must be bytes, got str"):
        loads("AFp")  # type: ignore[arg-type]


def test_unpicklable() -> None:
    """An unpicklable value raises MalformedPayload naming the type, a PersistenceError."""
    with pytest.raises(MalformedPayload, match="lock") as info:
        dumps(threading.Lock())
    assert isinstance(info.value, PersistenceError)


def test_a_class_not_importable_here_is_told_apart_from_damage() -> None:
    """A whole payload whose class this process cannot import is not called damaged: the message
    says to run where the application's modules import."""
    import collections

    blob = dumps(collections.OrderedDict(a=1)).replace(b"collections", b"collectionz")  # no such module
    with pytest.raises(MalformedPayload, match="a class it holds is not importable in this process") as info:
        loads(blob)
    assert "damaged" not in str(info.value)


def test_wide_containers_of_scalars_and_of_other_values() -> None:
    """A wide list, tuple, set or dict of scalars (a gather's results) is plain, looked at whole;
    one with a single value that is not (a lambda, deep in it or at its end) is not."""
    wide = {i: (None if i % 2 else f"r{i}") for i in range(100)}
    for value in (wide, list(wide.values()), tuple(wide), set(wide), frozenset(wide.values())):
        assert is_plain(value)
        assert dumps(value)[5:] == cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    for odd in ({**wide, 100: lambda: 1}, {**wide, "k": [(1, lambda: 1)]}, [*wide.values(), [lambda: 1]],
                (*wide, _Record("x", [lambda: 1]))):
        assert not is_plain(odd)
    assert is_plain([*wide.values(), [1, (2, b"x")], _Record("y", [1])])
