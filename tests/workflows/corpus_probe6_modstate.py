"""Corpus: programs of probe 6 that share state with their module or the process.

A local list or instance put into a module list, a module ``partial``'s argument list and a
module ``NamedTuple``'s mutable default held in locals, a local class registered with a module
``singledispatch`` function, the recursion limit changed across an await. Every workflow first
puts the module data back as the module makes it, so the native and the compiled runs start
alike; they read back module or process state their earlier steps changed, so they run in one
process only (a fresh one imports the module anew).
"""

from __future__ import annotations

import collections
import functools
import sys
import typing

from workflows import timer, workflow

from .diffharness import C, add

IN_PROCESS_ONLY = True


def tick(n: int = 1):
    return timer("t", n)


HOOKS: list = []


class Job:
    pass


@workflow
async def local_list_put_in_a_module_list(n):
    HOOKS.clear()
    got = [n]
    HOOKS.append(got)
    await tick()
    HOOKS[0].append(1)
    return got, HOOKS[0] is got


add(local_list_put_in_a_module_list, C(0), C(1), C(5))


@workflow
async def local_instance_reached_through_a_module_instance(n):
    HOOKS.clear()
    j = Job()
    j.n = n
    holder = Job()
    holder.child = j
    HOOKS.append(holder)
    await tick()
    HOOKS[0].child.n += 1
    return j.n, HOOKS[0] is holder


add(local_instance_reached_through_a_module_instance, C(0), C(1), C(5))


PART = functools.partial(print, [])


@workflow
async def module_partial_args_list_held(n):
    PART.args[0].clear()
    lst = PART.args[0]
    await tick()
    lst.append(n)
    return PART.args[0], lst is PART.args[0]


add(module_partial_args_list_held, C(0), C(1), C(5))


class Pt(typing.NamedTuple):
    x: int
    y: int = 7
    tags: list = []  # one list shared by every Pt made without tags


@workflow
async def namedtuple_mutable_default_shared(n):
    Pt._field_defaults["tags"].clear()
    a = Pt(n)
    b = Pt(2)
    a.tags.append("x")
    await tick()
    return a, b, a.tags is b.tags, a._replace(x=5), Pt(9).tags


add(namedtuple_mutable_default_shared, C(0), C(1), C(5))


@functools.singledispatch
def shape(x):
    return "thing"


@workflow
async def local_class_registered_with_singledispatch(n):
    tag = ("local", n)

    class Local:
        pass

    @shape.register(Local)
    def _loc(x):
        return tag

    o = Local()
    await tick()
    return shape(o), shape(1), shape("s")


add(local_class_registered_with_singledispatch, C(0), C(1), C(5))


@workflow
async def recursion_limit_changed_across_an_await(n):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 7 + n)
    try:
        await tick()
        return sys.getrecursionlimit() - old
    finally:
        sys.setrecursionlimit(old)  # put back even when the await is cancelled


add(recursion_limit_changed_across_an_await, C(0), C(1), C(5))


# Probe 6's first finding: module data holding a workflow's object through something the walk
# of module data did not follow (a bound method, a partial, an exception's args, a UserDict),
# or a function of the workflow registered there and held by no local (an observer). After a
# restore the module reached the pre-restore object, the workflow a copy.
UREG: collections.UserDict = collections.UserDict()
FAILED: list = []


@workflow
async def observer_lambda_held_by_no_local(n):
    HOOKS.clear()
    acc = [n]
    HOOKS.append(lambda v: acc.append(v))
    await tick()
    HOOKS[0](9)
    return acc


add(observer_lambda_held_by_no_local, C(0), C(1), C(5))


@workflow
async def observer_def_deleted_after_registering(n):
    HOOKS.clear()
    acc = [n]

    def on(v):
        acc.append(v)

    HOOKS.append(on)
    del on
    await tick()
    HOOKS[0](1)
    return acc


add(observer_def_deleted_after_registering, C(0), C(1), C(5))


@workflow
async def bound_builtin_method_in_a_module_list(n):
    HOOKS.clear()
    got = [n]
    HOOKS.append(got.append)
    await tick()
    HOOKS[0](4)
    return got


add(bound_builtin_method_in_a_module_list, C(0), C(1), C(5))


@workflow
async def bound_method_of_a_local_instance_in_a_module_list(n):
    HOOKS.clear()
    box = Job()
    box.got = [n]

    class Listener:
        def __init__(self, box):
            self.box = box

        def on(self, v):
            self.box.got.append(v)

    HOOKS.append(Listener(box).on)
    await tick()
    HOOKS[0](4)
    return box.got


add(bound_method_of_a_local_instance_in_a_module_list, C(0), C(1), C(5))


@workflow
async def partial_of_a_local_in_a_module_list(n):
    HOOKS.clear()
    got = [n]
    HOOKS.append(functools.partial(list.append, got))
    await tick()
    HOOKS[0](5)
    return got


add(partial_of_a_local_in_a_module_list, C(0), C(1), C(5))


@workflow
async def local_in_the_args_of_an_exception_in_a_module_list(n):
    FAILED.clear()
    job = Job()
    job.tries = n
    FAILED.append(ValueError(job))
    await tick()
    FAILED[0].args[0].tries += 1
    return job.tries


add(local_in_the_args_of_an_exception_in_a_module_list, C(0), C(1), C(5))


@workflow
async def local_in_a_module_userdict(n):
    UREG.clear()
    got = [n]
    UREG["me"] = got
    await tick()
    UREG["me"].append(1)
    return got


add(local_in_a_module_userdict, C(0), C(1), C(5))
