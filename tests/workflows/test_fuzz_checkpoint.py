"""Random combinations of checkpoint-sensitive state behave the same natively and restored.

Each generated program combines fragments, one per kind of state issue 31 lists: objects shared
with the module through every kind of path (class attributes, defaults, closure cells, deques,
defaultdicts, OrderedDicts, SimpleNamespaces, ``__slots__``, tuple keys, an observer registered
in a module list), live views, floats and big ints held twice (by locals, lists, instances, a
frozen dataclass, deques, OrderedDicts, defaultdicts and Events), exception attributes outside
``args``, set subclasses, records with their own ``__getattr__``, dicts keyed by identity and
sets of the module's functions and classes. It runs natively and compiled with a checkpoint and
restore at every await: the runs must agree, and every checkpoint must restore. Fragments a
restore could not give back (a set of objects hashed by identity, of range iterators, of a
list's methods or of a NaN in a tuple, an instance holding a frozenset of iterators, an ``int``
subclass whose ``__new__`` takes more arguments, a class whose metaclass reads the workflow's
variables, a view of part of a buffer) must be refused at the checkpoint, naming their variable
and saying what to write instead, never at the restore.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import workflows
from workflows import CheckpointError
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._context import StepContext

from . import probes
from .diffharness import Oracle, compare, run_compiled, run_native

SETTINGS = settings(
    max_examples=int(os.environ.get("ACTORFLOW_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Fragment:
    """Module-level code, its reset (run first by the workflow), workflow code before the awaits
    and after them (``{i}`` is the fragment's index, so that fragments combine)."""

    name: str
    module: str = ""
    reset: str = ""
    before: str = ""
    after: str = ""
    refused: str = ""  # the variable a checkpoint must refuse, naming it ("" if accepted)
    hint: str = ""  # a words of the fix the refusal gives


FRAGMENTS = [
    Fragment(
        "class attribute",
        module="class Reg{i}:\n    items = []",
        reset="Reg{i}.items = []",
        before="r{i} = Reg{i}.items",
        after="r{i}.append(x)\nlog(list(Reg{i}.items))",
    ),
    Fragment(
        "function default",
        module="def f{i}(v, acc=[]):\n    acc.append(v)\n    return list(acc)",
        reset="f{i}.__defaults__ = ([],)",
        before="d{i} = f{i}.__defaults__[0]",
        after="d{i}.append(1)\nlog(f{i}(2))",
    ),
    Fragment(
        "kwdefault and function attribute",
        module="def k{i}(*, acc={{}}):\n    return acc\nk{i}.seen = []",
        reset="k{i}.__kwdefaults__ = {{'acc': {{}}}}\nk{i}.seen = []",
        before="kw{i} = k{i}.__kwdefaults__['acc']\nfa{i} = k{i}.seen",
        after="kw{i}['x'] = x\nfa{i}.append(x)\nlog((k{i}(), k{i}.seen))",
    ),
    Fragment(
        "closure cell",
        module="def mk{i}():\n    c = []\n    return lambda v: c.append(v) or list(c)\nADD{i} = mk{i}()",
        reset="ADD{i}.__closure__[0].cell_contents.clear()",
        before="c{i} = ADD{i}.__closure__[0].cell_contents",
        after="c{i}.append(3)\nlog(ADD{i}(4))",
    ),
    Fragment(
        "deque, defaultdict, OrderedDict, SimpleNamespace",
        module=(
            "Q{i} = collections.deque([[0]])\nG{i} = collections.defaultdict(list)\n"
            "O{i} = collections.OrderedDict(a=[])\nNS{i} = types.SimpleNamespace(rows=[])"
        ),
        reset=(
            "Q{i}.clear()\nQ{i}.append([0])\nG{i}.clear()\nO{i}.clear()\nO{i}['a'] = []\n"
            "NS{i}.rows = []"
        ),
        before="q{i} = Q{i}[0]\ng{i} = G{i}['k']\no{i} = O{i}['a']\nns{i} = NS{i}.rows",
        after=(
            "q{i}.append(x)\ng{i}.append(x)\no{i}.append(x)\nns{i}.append(x)\n"
            "log((list(Q{i}), dict(G{i}), dict(O{i}), NS{i}.rows))"
        ),
    ),
    Fragment(
        "tuple, enum and frozen dataclass keys",
        module=(
            "class Col{i}(enum.Enum):\n    RED = 1\n"
            "@dataclasses.dataclass(frozen=True)\nclass DK{i}:\n    a: int\n"
            "T{i} = {{}}"
        ),
        reset="T{i}.clear()\nT{i}[(1, 'a')] = []\nT{i}[Col{i}.RED] = []\nT{i}[DK{i}(1)] = []",
        before="t{i} = T{i}[(1, 'a')]\nte{i} = T{i}[Col{i}.RED]\ntd{i} = T{i}[DK{i}(1)]",
        after="t{i}.append(x)\nte{i}.append(x)\ntd{i}.append(x)\nlog(list(T{i}.values()))",
    ),
    Fragment(
        "__slots__ instance",
        module="class S{i}:\n    __slots__ = ('rows',)\nSL{i} = S{i}()",
        reset="SL{i}.rows = []",
        before="sl{i} = SL{i}.rows",
        after="sl{i}.append(x)\nlog(SL{i}.rows)",
    ),
    Fragment(
        "observer registered in a module list",
        module="OBS{i} = []",
        reset="OBS{i}.clear()",
        before=(
            "seen{i} = []\ndef ob{i}(v):\n    seen{i}.append(v)\n    return len(seen{i})\n"
            "OBS{i}.append(ob{i})"
        ),
        after="log([fn(x) for fn in OBS{i}])\nlog(list(seen{i}))",
    ),
    Fragment(
        "live views",
        before=(
            "dv{i} = {{'a': 1}}\nkv{i}, vv{i}, iv{i} = dv{i}.keys(), dv{i}.values(), dv{i}.items()\n"
            "od{i} = collections.OrderedDict(b=2)\nok{i} = od{i}.keys()\n"
            "px{i} = types.MappingProxyType(dv{i})\nba{i} = bytearray(b'abc')\nmv{i} = memoryview(ba{i})"
        ),
        after=(
            "dv{i}['z'] = x\nod{i}['y'] = x\nba{i}[0] = 122\n"
            "log((list(kv{i}), list(vv{i}), list(iv{i}), list(ok{i}), dict(px{i}), bytes(mv{i})))"
        ),
    ),
    Fragment(
        "views of part of a buffer, iterators of an OrderedDict and a memoryview, a finished generator",
        before=(
            "pb{i} = bytearray(b'abcdef')\npv{i} = memoryview(pb{i})[1::2]\n"
            "po{i} = collections.OrderedDict(a=1, b=2, c=3)\npi{i} = reversed(po{i}.items())\nnext(pi{i})\n"
            "pm{i} = iter(memoryview(pb{i}))\nnext(pm{i})\npg{i} = (v for v in 'ab')\nlist(pg{i})"
        ),
        after=(
            "pb{i}[3] = x\npo{i}['a'] = x\n"
            "log((bytes(pv{i}), list(pi{i}), list(pm{i}), list(pg{i})))"
        ),
    ),
    Fragment(
        "floats and big ints held twice",
        before="nf{i} = float('nan')\nbi{i} = 10 ** 30 + x\nlf{i} = [nf{i}, bi{i}, nf{i}]",
        after="log((nf{i} in lf{i}, lf{i}.index(nf{i}), lf{i}[1] is bi{i}, lf{i}[0] is lf{i}[2]))",
    ),
    Fragment(
        "floats and big ints held by instances, deques, OrderedDicts and Events",
        module=(
            "class Box{i}:\n    pass\n"
            "@dataclasses.dataclass(frozen=True)\nclass Pt{i}:\n    v: object"
        ),
        before=(
            "hn{i} = float('nan')\nhb{i} = 10 ** 30 + x\nbx{i} = Box{i}()\n"
            "bx{i}.n, bx{i}.b = hn{i}, hb{i}\npt{i} = Pt{i}(hb{i})\n"
            "hq{i} = collections.deque([hn{i}])\nho{i} = collections.OrderedDict(b=hb{i})\n"
            "hd{i} = collections.defaultdict(list, n=hn{i})\nhe{i} = Event('e', hn{i})"
        ),
        after=(
            "log((bx{i}.n is hn{i}, bx{i}.b is hb{i}, pt{i}.v is hb{i}, hq{i}[0] is hn{i}, "
            "ho{i}['b'] is hb{i}, hd{i}['n'] is hn{i}, he{i}.value is hn{i}))"
        ),
    ),
    Fragment(
        "one float and one big int in three locals",
        before="fa{i} = fb{i} = fc{i} = float('nan')\nia{i} = ib{i} = ic{i} = 10 ** 25 + x",
        after=(
            "log((fa{i} is fb{i}, fb{i} is fc{i}, fa{i} in [fc{i}], ia{i} is ib{i}, ib{i} is ic{i}))"
        ),
    ),
    Fragment(
        "exception attributes",
        module=(
            "class SE{i}(Exception):\n    __slots__ = ('code',)\n"
            "    def __init__(self, code):\n        super().__init__(code)\n        self.code = code"
        ),
        before=(
            "try:\n    types.SimpleNamespace().nope{i}\nexcept AttributeError as e:\n    ea{i} = e\n"
            "try:\n    undefined_{i}\nexcept NameError as e:\n    en{i} = e\nse{i} = SE{i}(x)"
        ),
        after="log((ea{i}.name, type(ea{i}.obj).__name__, en{i}.name, se{i}.code))",
    ),
    Fragment(
        "set subclass",
        module="class SS{i}(set):\n    pass",
        before="ss{i} = SS{i}(range(0, 300, 7))\nss{i}.difference_update(range(0, 300, 21))\nss{i}.tag = x",
        after="log((list(ss{i}), ss{i}.tag))\nss{i}.add(1001)\nlog(list(ss{i}))",
    ),
    Fragment(
        "record with its own __getattr__",
        module=(
            "class Rec{i}:\n    def __init__(self, **f):\n        self.f = f\n"
            "    def __getattr__(self, n):\n        return self.f[n]"
        ),
        before="rec{i} = Rec{i}(a=x, b=[x])",
        after="rec{i}.b.append(1)\nlog((rec{i}.a, rec{i}.b))",
    ),
    Fragment(
        "dict keyed by identity",
        module="class N{i}:\n    pass",
        before="n{i} = N{i}()\ndef fk{i}():\n    return x\ndk{i} = {{n{i}: 1, fk{i}: 2}}",
        after="log((n{i} in dk{i}, fk{i} in dk{i}, list(dk{i}.values())))",
    ),
    Fragment(
        "set of the module's functions and classes",
        module="def mf{i}():\n    return 1\nclass MC{i}:\n    pass\nMO{i} = [object() for _ in range(4)]",
        before="ms{i} = {{mf{i}, MC{i}, None, len, *MO{i}}}\nms{i}.discard(MO{i}[0])",
        after=(
            "ms{i}.add(MO{i}[0])\n"
            "log([getattr(v, '__name__', None) or MO{i}.index(v) if v is not None else v for v in ms{i}])"
        ),
    ),
    Fragment(
        "attribute its class's __getstate__ drops, held by a local",
        module=(
            "class Pl{i}:\n    def __init__(self):\n        self.cache = {{}}\n        self.bag = []\n"
            "    def __getstate__(self):\n        s = dict(self.__dict__)\n        del s['cache']\n"
            "        return s\n"
            "    def __setstate__(self, s):\n        self.__dict__.update(s)\n        self.cache = {{}}"
        ),
        before="pl{i} = Pl{i}()\npc{i} = pl{i}.cache\npb{i} = pl{i}.bag\npc{i}['k'] = x",
        after="pc{i}[x] = 1\npb{i}.append(x)\nlog((pl{i}.cache, pc{i} is pl{i}.cache, pl{i}.bag))",
    ),
    Fragment(
        "list a __reduce__ copies, shared by two instances",
        module=(
            "class Sq{i}:\n    def __init__(self, m):\n        self.m = list(m)\n"
            "    def __reduce__(self):\n        return (Sq{i}, (self.m,))"
        ),
        before="sa{i} = Sq{i}([x])\nsb{i} = Sq{i}([])\nsb{i}.m = sa{i}.m",
        after="sa{i}.m.append(1)\nlog((sb{i}.m, sa{i}.m is sb{i}.m))",
    ),
    Fragment(
        "int and tuple subclasses whose __new__ takes other arguments",
        module=(
            "class Money{i}(int):\n    def __new__(cls, gold, silver=0, cur='g'):\n"
            "        o = super().__new__(cls, gold * 100 + silver)\n        o.cur = cur\n        return o\n"
            "class Vec{i}(tuple):\n    def __new__(cls, *xy):\n        return super().__new__(cls, xy)"
        ),
        before="m{i} = Money{i}(5, 1, 'EUR')\nv{i} = Vec{i}(x, 2)",
        after="log((int(m{i}), m{i}.cur, v{i}, type(v{i}).__name__))",
    ),
]

REFUSED = [
    Fragment(
        "set of objects hashed by identity",
        module="class H{i}:\n    pass",
        before="hs{i} = {{H{i}(), H{i}()}}",
        after="log(len(hs{i}))",
        refused="hs{i}",
        hint="__hash__",
    ),
    Fragment(
        "set of range iterators",
        before="ri{i} = set(iter(range(3)) for _ in range(4))",
        after="log(len(ri{i}))",
        refused="ri{i}",
        hint="range_iterator",
    ),
    Fragment(
        "set of a list's methods and a NaN in a tuple",
        before="lm{i} = []\nsm{i} = {{lm{i}.append, lm{i}.pop, (1, float('nan'))}}",
        after="log(len(sm{i}))",
        refused="sm{i}",
        hint="hold a list",
    ),
    Fragment(
        "instance holding a frozenset of iterators",
        module="class Bag{i}:\n    def __init__(self, items):\n        self.items = items",
        before="bg{i} = Bag{i}(frozenset([iter([1]), iter([2, 3])]))",
        after="log(len(bg{i}.items))",
        refused="bg{i}",
        hint="list_iterator",
    ),
    Fragment(
        "class whose __new__ takes an argument",
        module=(
            "class Token{i}:\n    def __new__(cls, v):\n"
            "        o = super().__new__(cls)\n        o.v = v\n        return o"
        ),
        before="m{i} = Token{i}(5)",
        after="log(m{i}.v)",
        refused="m{i}",
        hint="__getnewargs__",
    ),
    Fragment(
        "metaclass reading the workflow's variables",
        before=(
            "tag{i} = 'T'\nclass Meta{i}(type):\n    def __new__(mcls, name, bases, ns):\n"
            "        ns['tag'] = tag{i}\n        return super().__new__(mcls, name, bases, ns)\n"
            "class K{i}(metaclass=Meta{i}):\n    pass"
        ),
        after="log(K{i}.tag)",
        refused="K{i}",
        hint="module level",
    ),
    Fragment(
        "dict holding its own iterator",
        before="cd{i} = {{'a': 1, 'it': None}}\ncd{i}['it'] = iter(cd{i})\nnext(cd{i}['it'])",
        after="log(list(cd{i}['it']))",
        refused="cd{i}",
        hint="outside its dict",
    ),
]

HEADER = "import collections, dataclasses, enum, types\n"


def _indent(code: str, n: int) -> str:
    return textwrap.indent(code, " " * n) if code else ""


def source(frags: list[Fragment], awaits: int) -> str:
    """A module with the fragments' module code and a workflow ``wf(x)`` that resets them, runs
    their befores, then their afters spread over ``awaits`` awaits."""
    parts = [HEADER]
    for i, f in enumerate(frags):
        if f.module:
            parts.append(f.module.format(i=i) + "\n")
    body = ["async def wf(x):"]
    for i, f in enumerate(frags):
        if f.reset:
            body.append(_indent(f.reset.format(i=i), 4))
    for i, f in enumerate(frags):
        if f.before:
            body.append(_indent(f.before.format(i=i), 4))
    body.append("    await wait()")
    for n, (i, f) in enumerate(enumerate(frags)):
        body.append(_indent(f.after.format(i=i), 4))
        if n < awaits:
            body.append("    await wait()")
    body.append("    return x")
    return "\n".join(parts) + "\n" + "\n".join(body) + "\n"


def _compile(src: str, noted: bool = True):
    if noted:
        note(src)
    g = {n: getattr(workflows, n) for n in workflows.__all__}
    g.update(log=probes.log, wait=probes.wait)
    return compile_workflow_source(src, "fuzz_checkpoint.py", "wf", g)


@pytest.mark.timeout(900)
@SETTINGS
@given(
    frags=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4),
    awaits=st.integers(0, 3),
    x=st.sampled_from([1, 2, 7]),
)
def test_checkpoint_sensitive_state_agrees_with_native(frags, awaits, x):
    """Every combination of accepted state: the restored run agrees with the native one."""
    wf = _compile(source(frags, awaits))
    oracle = Oracle(limit=40)
    native = run_native(wf, (x,), oracle)
    assert native.failure is None, native.failure
    restored = run_compiled(wf, (x,), oracle, roundtrip=True)
    assert restored.failure is None, restored.failure  # every checkpoint was taken and restored
    diffs = compare(native, restored, with_chain=True)
    assert not diffs, "\n".join(diffs)


@pytest.mark.timeout(900)
@SETTINGS
@given(
    frags=st.lists(st.sampled_from(FRAGMENTS), max_size=2),
    bad=st.sampled_from(REFUSED),
    where=st.integers(0, 2),
)
def test_unrestorable_state_is_refused_at_the_checkpoint_naming_it(frags, bad, where):
    """A fragment a restore could not give back, among accepted ones: the checkpoint raises
    CheckpointError naming its variable and the fix; no restore is ever attempted on it."""
    frags = list(frags)
    where = min(where, len(frags))
    frags.insert(where, bad)
    wf = _compile(source(frags, 0))
    cont = wf.start(1)
    with StepContext().active():
        step(cont)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == bad.refused.format(i=where), str(info.value)
    assert bad.hint in str(info.value), str(info.value)


def test_every_accepted_fragment_alone_restores_equal():
    """Each accepted fragment, alone, checkpoints and restores (a direct check, not sampled)."""
    for frag in FRAGMENTS:
        wf = _compile(source([frag], 1), noted=False)
        cont = wf.start(3)
        with StepContext().active():
            step(cont)
        back = restore(checkpoint(cont))
        assert back._frames[0].__dict__.keys() == cont._frames[0].__dict__.keys(), frag.name
