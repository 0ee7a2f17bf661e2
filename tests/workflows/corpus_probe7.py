"""Corpus: programs of compiler probe 7 that compile faithfully, and its fixed findings.

- A comprehension that awaits and binds to a subscript or an attribute (``for d["k"] in xs``,
  ``for b.n in xs``): the ``d`` and ``b`` it stores into are the workflow's own (they were
  taken for variables of the comprehension and never set).
- An expression statement reading an attribute named ``_af_sent`` of the workflow's own object:
  it runs (it was taken for the compiler's resume slot and dropped).
- A ``with`` whose manager changes its class in ``__enter__`` (a state object) or whose class
  gets another ``__exit__`` while the body awaits: the ``__exit__`` called is the one looked up
  as the ``with`` began, as natively.
"""

from __future__ import annotations

from workflows import timer, workflow

from .diffharness import C, add


def tick(n: int = 1):
    return timer("t", n)


class Box:
    n = 0


@workflow
async def comprehension_stores_into_a_subscript_and_an_attribute(n):
    d = {"k": 0}
    b = Box()
    xs = [await tick() or d["k"] for d["k"] in ["a", "b"]]
    ys = [(await tick(), b.n)[1] for b.n in [n, n + 1]]
    return xs, d, ys, b.n


add(comprehension_stores_into_a_subscript_and_an_attribute, C(0), C(7), C(-2))


class Prop:
    @property
    def _af_sent(self):
        raise ValueError("the property ran")


@workflow
async def attribute_named_like_the_resume_slot_is_read(n):
    p = Prop()
    await tick()
    try:
        p._af_sent  # noqa: B018 (the read is the point)
    except ValueError as e:
        return f"raised: {e}", n
    return "skipped", n


add(attribute_named_like_the_resume_slot_is_read, C(1), C(2), C(3))


class Closed:
    def __exit__(self, *exc):
        return False


class Opening:
    """A manager whose ``__enter__`` turns it into a ``Closed``: natively the ``with`` calls the
    ``__exit__`` it looked up before ``__enter__``, which swallows the error."""

    def __enter__(self):
        self.__class__ = Closed
        return self

    def __exit__(self, *exc):
        return True


@workflow
async def with_calls_the_exit_looked_up_as_it_began(n):
    with Opening():
        await tick()
        raise ValueError(n)
    return "swallowed", n


add(with_calls_the_exit_looked_up_as_it_began, C(3), C(0), C(5))
