"""The ``@workflow`` compiler: ``async def`` -> a picklable, resumable state machine.

Pure like the rest of ``workflows``: standard library and cloudpickle only. The pipeline is
``_api`` (source, validation, codegen, registration), ``_validate`` (rejections), ``_scope``
(name resolution and rewriting), ``_lower`` (exploding awaits into blocks) and ``_runtime``
(frames, the block driver, checkpoints).
"""

from ._api import CompiledCode, WorkflowFunction, compile_workflow_source, workflow
from ._runtime import (
    Continuation,
    SubCall,
    check_upgrade,
    checkpoint,
    restore,
    restore_upgrading,
    step,
)

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
