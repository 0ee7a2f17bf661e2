"""``CompiledCode``: the generated state machine of one workflow and its static tables."""

from __future__ import annotations

import ast
import os
from typing import Any

from ._scope import LOCAL, user_name
from ._upgrade import PointTable

Span = tuple[int, int, int, int]  # line, column, end line, end column (as ``ast`` has them)


class CompiledCode:
    """The generated state machine of one workflow: blocks and their static tables."""

    def __init__(
        self,
        key: str,
        fingerprint: str,
        filename: str,
        blocks: list[Any],
        handlers: list[Any],
        hctx: list[Any],
        points: dict[int, tuple[int, str]],
        slots: dict[str, str],
    ) -> None:
        self.key = key
        self.fingerprint = fingerprint
        self.filename = filename
        self.blocks = blocks
        self.handlers = handlers
        self.hctx = hctx
        self.points = points
        self.slots = slots
        self.globals: dict[str, Any] = {}  # the workflow module's namespace
        self.native: Any = None  # the async def's code: its constants are the module's
        self.constants: tuple[int, dict[int, tuple[str, Any]]] | None = None  # (module_constants)
        self.block_asts: list[Any] = []
        self.stubs: dict[int, Any] = {}
        # 3.11: per lowered comprehension that awaits (by its result slot), a function that
        # raises at the comprehension's line, where a StopIteration leaving it becomes a
        # RuntimeError (empty since 3.12, where comprehensions are inlined).
        self.comp_stops: dict[str, Any] = {}
        # 3.11: per lowered comprehension, its source span and its first iterable's, as
        # (line, column, end line, end column): a workflow variable read unbound in the rest of
        # it is a free variable of the comprehension's own scope there (NameError, not
        # UnboundLocalError).
        self.comp_spans: list[tuple[Span, Span]] = []
        self._point_text: dict[int, str] = {}  # describe_point's answers: asked at every step
        self.table: PointTable | None = None  # the points' identities, for upgrades (_upgrade)
        # Whether nested functions, lambdas or classes of the workflow use its locals (so close
        # over its frame): only then may module data hold a function that does (an observer).
        self.closures = False

    def dump(self) -> str:
        """The generated block functions as Python source (for debugging the compiler)."""
        out = []
        for label, fdef in enumerate(self.block_asts):
            if fdef is None:
                continue
            region = self.handlers[label]
            handling = ", ".join(f"{slot} ({kind.name.lower()})" for slot, kind in self.hctx[label])
            out.append(
                f"# block {label}  on exception -> {region.target} ({region.slot})"
                f"{'  handling ' + handling if handling else ''}"
            )
            out.append(ast.unparse(fdef))
        return "\n".join(out)

    def where(self, pc: int) -> str:
        """``file.py:12`` of the await that resumes at block ``pc``."""
        line = self.points.get(pc, (0, ""))[0]
        return f"{os.path.basename(self.filename)}:{line}"

    def describe_point(self, pc: int | None) -> str | None:
        """``file.py:12 await timer('t', 5)`` for a resume block, else None."""
        if pc is None:
            return None
        try:
            return self._point_text[pc]
        except KeyError:
            pass
        if pc not in self.points:
            return None
        line, text = self.points[pc]
        described = self._point_text[pc] = f"{os.path.basename(self.filename)}:{line} {text}"
        return described

    def describe_slot(self, name: str) -> str:
        """A readable name for a frame attribute (a local or an internal slot)."""
        if name in self.slots:
            return self.slots[name]
        if name.startswith("_af_t"):
            return "an intermediate value of an expression"
        if name == "_af_sent":
            return "the result of the last await"
        if name.startswith(LOCAL):
            return f"local {user_name(name)!r}"
        return "an internal value of the compiled workflow"


__all__ = ["CompiledCode"]
