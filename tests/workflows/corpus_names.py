"""Corpus: the names a workflow's code sees as native code does.

- A workflow defined in a class body (a method): ``self.__x``, ``Svc.__x`` and ``__x`` names in
  its body and in the functions it makes are the class's private names, mangled with the class's
  name (``self._Svc__x``) as CPython compiles them; they were left unmangled (an AttributeError,
  or another global read).
- The ``__qualname__`` of a function, class or lambda made in a workflow that is a method or is
  defined in a function is under the workflow's whole qualified name (``Svc.run.<locals>.h``,
  ``make.<locals>.wf.<locals>.K``), not under its bare name (``run.<locals>.h``).
- Under ``from __future__ import annotations`` (as in this module), the annotations of a
  function or class made in a workflow are the text of their source (``'Count'``), not of the
  compiled code (``'_af_f.v_Count'``): a dataclass field annotated with a ``ClassVar`` imported
  in the workflow (and in the module, where dataclasses looks it up) is a class variable, not a
  field (a list default made it raise ValueError).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar  # noqa: F401 (dataclasses looks a string ClassVar up here)

from workflows import timer, workflow

from .diffharness import C, add


def tick(n: int = 1):
    return timer("t", n)


_Ledger__RATE = 3  # what ``__RATE`` names in the body of class Ledger


class Ledger:
    __fee = 2

    def __init__(self, owner):
        self.__owner = owner
        self.__entries = []

    @workflow
    async def settle(self, n):
        self.__entries.append(n)
        await tick()
        __total = n * self.__fee + __RATE  # noqa: F821 (it is _Ledger__RATE)

        def owed(k):
            return __total + k * Ledger.__fee

        await tick()
        self.__entries.append(owed(1))
        return self.__owner, list(self.__entries), owed(0), hasattr(self, "_Ledger__owner")

    @staticmethod
    @workflow
    async def describe(n):
        def h():
            return n

        class Row:
            def show(self):
                return n

        await tick()
        return h.__qualname__, Row.__qualname__, Row.show.__qualname__, (lambda: 0).__qualname__

    class Page:
        @workflow
        async def render(self, n):
            await tick()

            def part():
                return n

            return part.__qualname__, part()


add(Ledger.settle, C(Ledger("ann"), 1), C(Ledger("bob"), 4), C(Ledger("cy"), -2))
add(Ledger.describe, C(1), C(2), C(3))
add(Ledger.Page.render, C(Ledger.Page(), 1), C(Ledger.Page(), 5), C(Ledger.Page(), 0))


def make_workflow():
    @workflow
    async def made_in_a_function(n):
        def h():
            return n

        class K:
            def m(self):
                return n

        await tick()
        return h.__qualname__, K.__qualname__, K.m.__qualname__, K().m()

    return made_in_a_function


add(make_workflow(), C(1), C(3), C(0))


@workflow
async def annotations_are_the_text_of_their_source(n):
    from typing import ClassVar  # noqa: F811 (a workflow local named as the module's)

    Count = int

    def scale(x: Count, *, by: Count = 2) -> Count | None:
        return x * by

    await tick()

    @dataclasses.dataclass
    class Stock:
        units: Count
        registry: ClassVar[list] = []

    class Plain:
        label: quoted  # noqa: F821 (never evaluated)
        size: Count = 0

    s = Stock(scale(n))
    fields = [f.name for f in dataclasses.fields(Stock)]
    return scale.__annotations__, Stock.__annotations__, Plain.__annotations__, fields, s.units


add(annotations_are_the_text_of_their_source, C(1), C(4), C(0))
