"""Classes made in a workflow, rebuilt by a restore: their class-creation hooks run only where
the class is made anew.

cloudpickle rebuilds a class made at run time by making a new class (``types.new_class``, which
runs the bases' ``__init_subclass__``, the metaclass and ``__set_name__``) and then, if the
process still has the original class, returning the original and dropping the new one. The hooks
of the dropped class have run all the same: a plugin base whose ``__init_subclass__`` registers
every subclass in a module list gets a second, dead class there at every restore. Here the
original is looked up first, and the class is made only in a process that does not have it,
and with its ``__slots__``. There the hooks of a module's base run, as at its class statement;
those of a base made at run time too do not: what they did is in the state the restore sets.
"""

from __future__ import annotations

import typing
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

_cp = cloudpickle.cloudpickle
_TYPED_DICT_META = getattr(typing, "_TypedDictMeta", None)
_MAKE = getattr(_cp, "_make_skeleton_class", None)
# cloudpickle's classes by tracker id (a WeakValueDictionary): the classes of this process that a
# restore gives back as themselves. Where a cloudpickle release no longer has it, classes are
# rebuilt as cloudpickle rebuilds them (test_unseen_refusals pins that it is there).
TRACKER: Any = getattr(_cp, "_DYNAMIC_CLASS_TRACKER_BY_ID", None)


def make_class_once(
    type_constructor: Any, name: str, bases: Any, type_kwargs: Any, tracker_id: Any, extra: Any
) -> Any:
    """The class with ``tracker_id`` if this process has it; else cloudpickle's new class."""
    if tracker_id is not None and TRACKER is not None:
        existing = TRACKER.get(tracker_id)
        if existing is not None:
            return existing
    assert _MAKE is not None
    # The hooks of bases made at run time too (rebuilt by this restore) do not run: what they did
    # to the class and to the base (a registry kept on it) is in the state the restore sets, and
    # the class keywords they took are not kept. Those of a module's base run, as at an import.
    quiet = [k for b in bases if isinstance(b, type) for k in b.__mro__
             if "__init_subclass__" in k.__dict__ and k in _DYNAMIC]
    saved = {k: k.__dict__["__init_subclass__"] for k in quiet}
    for k in quiet:
        type.__setattr__(k, "__init_subclass__", _NO_HOOK)
    try:
        if "__slots__" in type_kwargs:
            try:
                return _MAKE(type_constructor, name, bases, type_kwargs, tracker_id, extra)
            except Exception:
                # A metaclass that makes its own slots (and refuses them in the namespace): the
                # class as cloudpickle makes it, rather than no class at all.
                type_kwargs = {k: v for k, v in type_kwargs.items() if k != "__slots__"}
        return _MAKE(type_constructor, name, bases, type_kwargs, tracker_id, extra)
    finally:
        for k, hook in saved.items():
            type.__setattr__(k, "__init_subclass__", hook)


def _no_hook(cls: Any, /, **_kw: Any) -> None:
    return None


_NO_HOOK: Any = classmethod(_no_hook)
# cloudpickle's classes made at run time (this process's, and those its restores made).
_DYNAMIC: Any = getattr(_cp, "_DYNAMIC_CLASS_TRACKER_BY_CLASS", {})


def once(cls: type, r: Any) -> Any:
    """cloudpickle's reduce value ``r`` of class ``cls``, made with ``make_class_once``, and
    with its ``__slots__`` in the namespace the class is made from.

    cloudpickle sets ``__slots__`` on the class after making it, where it is an attribute like
    any other: the class made in another process has no slots, and its instances have a
    ``__dict__`` (``obj.undeclared = 1`` works there, and raises AttributeError natively).
    """
    if _MAKE is None or not (isinstance(r, tuple) and len(r) > 1 and r[0] is _MAKE):
        return r
    args = r[1]
    slots = cls.__dict__.get("__slots__")
    if slots and isinstance(args, tuple) and len(args) > 3 and isinstance(args[3], dict):
        args[3]["__slots__"] = slots
    if (
        type(cls) is _TYPED_DICT_META and "__orig_bases__" not in cls.__dict__
        and isinstance(args, tuple) and len(args) > 2 and args[2] == (dict,)
    ):
        # TypedDict("TD", {...}) on 3.11 leaves __orig_bases__ out (3.12 sets it), so its bases
        # are (dict,), which TypedDict's metaclass refuses: made as TypedDict's own subclass.
        args = (*args[:2], (typing.TypedDict,), *args[3:])
    rest = r[2:]
    if len(rest) >= 4 and rest[3] is _cp._class_setstate:
        rest = (*rest[:3], set_class_state, *rest[4:])
    return (make_class_once, args, *rest)


def set_class_state(cls: Any, state: Any) -> Any:
    """cloudpickle's ``_class_setstate``, then without the attributes the checkpoint did not
    record: a restore in the process that made the class gives back the class itself
    (``make_class_once``), which may hold attributes a step added after the checkpoint (a step
    rolled back and run again). The class's own machinery (dunders, slots) is left alone."""
    _cp._class_setstate(cls, state)
    recorded = state[0] if isinstance(state, tuple) and state else None
    if not isinstance(recorded, dict):
        return cls
    slots = cls.__dict__.get("__slots__", ())
    keep = {slots} if isinstance(slots, str) else set(slots or ())
    inherited: dict[str, Any] = {}
    for base in reversed(cls.__bases__):
        inherited.update(base.__dict__)
    for name in [k for k in cls.__dict__ if k not in recorded]:
        if (
            type(name) is not str
            or name in keep
            or name == "_abc_impl"
            or name.startswith("__") and name.endswith("__")
            or inherited.get(name, _NONE) is cls.__dict__[name]  # left out as inherited
        ):
            continue
        type.__delattr__(cls, name)
    return cls


_NONE: Any = object()
