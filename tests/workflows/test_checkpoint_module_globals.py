"""A module global of any type held in a local is the module's object after a restore in a new
process.

A local holding a module-level ``bytearray``, ``decimal.Context``, iterator, ``staticmethod``
(or, on 3.11, ``io.StringIO``), or one of these reached through module data
(``SETTINGS["money"]``), came back as a copy: ``ctx.prec = 9`` after the await no longer
changed the module's context, ``buf.append(...)`` no longer the module's buffer. The C pickler
writes a ``bytearray`` without asking the checkpoint's rules, and the other types have rules of
their own, which were applied before the module's names were looked up.
"""

from __future__ import annotations

import decimal
import io
import types

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import native, restarted

BUF = bytearray(b"abc")
CTX = decimal.Context(prec=4)
LOG = io.StringIO()
TICKETS = iter([1, 2, 3, 4])
SETTINGS = {"money": decimal.Context(prec=6), "log": io.StringIO(), "ids": iter([7, 8])}

# A read-only view of a dict no global names: what it holds is module data too.
LIMITS = types.MappingProxyType({"hp": [100], "zones": {"north": [1, 2]}, (1, 2): [3]})


class Tools:
    size = staticmethod(len)


@workflow
async def holds_module_globals():
    b, c, f, it = BUF, CTX, LOG, TICKETS
    await timer("t", 1)
    return b is BUF, c is CTX, f is LOG, it is TICKETS


@workflow
async def holds_module_data_of_library_types():
    c, f, it = SETTINGS["money"], SETTINGS["log"], SETTINGS["ids"]
    s = Tools.__dict__["size"]
    await timer("t", 1)
    return c is SETTINGS["money"], f is SETTINGS["log"], it is SETTINGS["ids"], s is Tools.__dict__["size"]


@workflow
async def changes_the_modules_context_and_buffer():
    c, b = CTX, BUF
    await timer("t", 1)
    c.prec = 9
    before = CTX.prec
    b.append(ord("d"))
    got = (before, CTX.prec, bytes(BUF))
    CTX.prec = 4
    del BUF[3:]
    return got


@workflow
async def holds_items_of_a_mapping_proxy():
    hp, north, by_tuple = LIMITS["hp"], LIMITS["zones"]["north"], LIMITS[(1, 2)]
    await timer("t", 1)
    hp.append(50)
    got = (hp is LIMITS["hp"], north is LIMITS["zones"]["north"], by_tuple is LIMITS[(1, 2)], list(LIMITS["hp"]))
    hp.pop()
    return got


def test_module_globals_of_library_types_are_the_modules_in_a_new_process():
    assert native(holds_module_globals) == (True,) * 4
    assert restarted(holds_module_globals) == (True,) * 4


def test_module_data_of_library_types_is_the_modules_in_a_new_process():
    assert native(holds_module_data_of_library_types) == (True,) * 4
    assert restarted(holds_module_data_of_library_types) == (True,) * 4


def test_a_change_through_the_local_is_the_modules_after_a_restore():
    want = (9, 9, b"abcd")
    assert native(changes_the_modules_context_and_buffer) == want
    assert restarted(changes_the_modules_context_and_buffer) == want
    h = WorkflowHarness(changes_the_modules_context_and_buffer, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want


def test_the_items_of_a_module_level_mapping_proxy_are_the_modules_in_a_new_process():
    """A ``MappingProxyType`` was not looked into: what it held came back as a copy."""
    want = (True, True, True, [100, 50])
    assert native(holds_items_of_a_mapping_proxy) == want
    assert restarted(holds_items_of_a_mapping_proxy) == want
