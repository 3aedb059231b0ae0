"""Which operation serves a work command, run in the calling task.

`run_command` is what the turn driver (and a nested call inside a turn)
runs: the command's operation from `pride.operations` over a `BranchTurn`
view, or, for ``Call``, the branch's verb of that name (attribute first) or
its registered operation. A ``Call`` can arrive as data from anywhere, so
the attribute lookup stops at the public async verbs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UnknownOperation
from ..messages import Call, Resume, WorkCommand
from ..operations import execute
from .view import BranchTurn

if TYPE_CHECKING:
    from ..budget.accounts import Meter
    from .actor import ServedBranch
    from .instrument import TurnTrace
    from .turn import TurnScope

__all__ = ["run_command"]

# Public async methods of a Branch that are no operation: the actor's own machinery
# (its loop, delivering envelopes), firing hook points (a request would forge their
# payloads), copying the branch.
_NOT_VERBS = frozenset({"serve", "deliver", "run_hook", "aclone"})


async def run_command(
    branch: ServedBranch,
    command: WorkCommand,
    scope: TurnScope | None,
    meter: Meter | None = None,
    trace: TurnTrace | None = None,
) -> Any:
    """Run ``command``'s operation in the calling task (the turn driver or a nested call).

    ``meter`` and ``trace`` are the allowance and the tracing of a work item
    served outside a turn (an ``Act``); a turn's calls use the scope's.

    A ``Call`` runs the branch's verb of that name (attribute first), else the
    registered operation, which receives the branch itself.

    Raises:
        UnknownOperation: a Call names neither a verb nor a registered operation.
        TypeError: ``Call.operation`` is not a str; no operation serves the command.
        RuntimeError: a ``Resume`` from inside a turn of the same branch.
    """
    if isinstance(command, Resume):  # the turn driver serves it; nested, it would wait on itself
        raise RuntimeError(
            f"branch {branch.name!r}: a turn cannot resume a turn of its own branch; send the "
            "Resume from outside the branch (session.resolve)"
        )
    if isinstance(command, Call):
        name = command.operation
        if not isinstance(name, str):
            raise TypeError(f"Call.operation must be a str, got {type(name).__name__}")
        if hasattr(branch, name):  # attribute first: a bound verb takes no branch argument
            return await _verb(branch, name)(**command.kwargs)
        operation = branch.operations.get(name)
        if operation is None:
            raise UnknownOperation(name)
        return await operation(branch, **command.kwargs)
    return await execute(BranchTurn(branch, scope, meter, trace=trace), command)


def _verb(branch: ServedBranch, name: str) -> Callable[..., Any]:
    """The Branch attribute ``name`` as a Call may run it: a public async verb.

    A Call can arrive as data from anywhere, so attribute-first lookup stops at
    the verbs: never a private helper, the actor's own machinery, or a sync
    method with side effects (``dump_logs`` writes files).

    Raises:
        UnknownOperation: the attribute is not such a verb.
    """
    found = getattr(branch, name)
    if name.startswith("_") or name in _NOT_VERBS or not inspect.iscoroutinefunction(found):
        raise UnknownOperation(name)
    return found  # type: ignore[no-any-return]
