"""The ``@workflow`` compiler: ``async def`` -> a picklable, resumable state machine.

Pure like the rest of ``workflows``: standard library and cloudpickle only. The pipeline is
``_workflow`` (``@workflow``: finding the source, registration), ``_validate`` (rejections and
warnings), ``_scope`` (name resolution and rewriting), ``_lower`` (exploding awaits into blocks),
``_codegen`` (block functions and their tables: a ``_code.CompiledCode``, wrapped in a
``_function.WorkflowFunction``); what runs them is ``_runtime`` (frames and the helpers the
blocks call), ``_driver`` (``step``) and ``_checkpoint`` (``checkpoint``, ``restore``).
"""

from ._checkpoint import check_upgrade, checkpoint, restore, restore_upgrading
from ._code import CompiledCode
from ._driver import Continuation, step
from ._function import WorkflowFunction
from ._runtime import SubCall
from ._workflow import compile_workflow_source, workflow

__all__ = [
    "CompiledCode",
    "Continuation",
    "SubCall",
    "WorkflowFunction",
    "check_upgrade",
    "checkpoint",
    "compile_workflow_source",
    "restore",
    "restore_upgrading",
    "step",
    "workflow",
]
