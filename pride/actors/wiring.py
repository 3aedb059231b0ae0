"""A branch's session wiring: attach and detach, and delivering its signals and hooks.

A session's references arrive in an ``Attach`` (applied by the actor between
turns, all or nothing) and are kept on the branch's `Actor` (each function here
takes the branch, and finds its actor on it):
the observer (a `SignalSink`), the hook bus (a `HookSink`), the
owner id and a name directory. The session's operation registry stands behind
the branch's own (the branch's names are found first, and survive detaching);
the memory default goes to the branch itself.

Delivery keeps a turn's signals in order: synchronous subscribers and handlers run at once,
isolated; asynchronous ones returned as one awaitable are spawned into the
live turn's signal group (drained before the terminal signal) or, outside a
turn, into the actor's nursery as best-effort background work. Lifecycle
signals (``RunStart`` and the terminals) are awaited, bounded by
``FINALIZE_GRACE``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..budget.accounts import Account
from ..context.capabilities import observe
from ..errors import Escalate
from ..memory import is_memory_store
from ..messages import AssistantResponse, Attach, MessageAdded, RoledMessage, Signal
from ..operations.registry import OperationManager
from . import turn

if TYPE_CHECKING:
    from .actor import ServedBranch

__all__ = [
    "attach",
    "await_lifecycle",
    "check_attachment",
    "detach",
    "dispatch_lifecycle",
    "emit",
    "emit_lifecycle",
    "fire_hook",
    "message_recorded",
    "run_hook",
]

log = logging.getLogger("pride.branch")


# ------------------------------------------------------------ attach, detach


def check_attachment(command: Attach) -> None:
    """Refuse an Attach whose references cannot do their job.

    Raises:
        TypeError: naming the field (an observer without ``dispatch``, hooks
            without ``emit``, a directory without ``resolve_name`` or ``rename``, an operation
            registry or memory store of the wrong type, an owner id that is
            not a UUID).
    """
    for field, method in (
        ("observer", "dispatch"),
        ("hooks", "emit"),
        ("directory", "resolve_name"),
        ("directory", "rename"),
    ):
        value = getattr(command, field)
        if value is not None and not callable(getattr(value, method, None)):
            raise TypeError(
                f"Attach.{field} must have a {method}() method, got {type(value).__name__}"
            )
    memory = command.memory  # one per Attach: a spawn checks it (see is_memory_store)
    if memory is not None and not is_memory_store(memory):
        raise TypeError(f"Attach.memory must be a MemoryStore, got {type(memory).__name__}")
    wrong = (
        ("operations", OperationManager, "an OperationManager"),
        ("owner_id", UUID, "a UUID"),
        ("account", Account, "a usage Account"),
    )
    for field, expected, what in wrong:
        value = getattr(command, field)
        if value is not None and not isinstance(value, expected):
            raise TypeError(f"Attach.{field} must be {what}, got {type(value).__name__}")


def attach(branch: ServedBranch, command: Attach) -> None:
    """Apply ``command`` (between turns): all of it, or nothing if it is malformed.

    Raises:
        TypeError: see `check_attachment`.
        ValueError: ``command.operations`` is the branch's own registry (or
            already stands in front of it).
    """
    check_attachment(command)
    actor = branch.actor
    if command.operations is not None:
        # First, so a registry that would stand behind itself refuses the lot.
        branch.operations.shared = command.operations  # behind the branch's own, never over it
    actor.owner_id = command.owner_id
    actor.watch_with(command.observer)
    actor.hooks = command.hooks
    actor.directory = command.directory
    actor.account.parent = command.account
    if command.memory is not None:
        branch.offer_memory(command.memory)  # first claim: never replace a store in use


def rename(branch: ServedBranch, name: str) -> None:
    """Tell the attached directory that the branch is about to be called ``name``.

    Raises:
        ValueError: the directory refuses it (another member has the name).
    """
    directory = branch.actor.directory
    if directory is not None:
        directory.rename(branch, name)


def detach(branch: ServedBranch) -> None:
    """Undo an attachment: owner, observer, hooks, directory, the session's
    account and its operation registry cleared; the branch's own operations stay."""
    actor = branch.actor
    actor.owner_id = None
    actor.account.parent = None
    actor.watch_with(None)
    actor.hooks = None
    actor.directory = None
    branch.operations.shared = None


# ------------------------------------------------------------ signals, hooks


def message_recorded(branch: ServedBranch, message: RoledMessage) -> None:
    """Tell the observer and the hooks that ``message`` was recorded.

    The observer gets ``MessageAdded`` and, for an assistant reply under a
    capability grant, the capability signals (observation only: nothing
    is executed); the hooks get ``message_added``.
    """
    actor = branch.actor
    observer = actor.observer
    grant = branch.capabilities
    wanted = observer is not None and actor.wants(MessageAdded)
    if wanted or (observer is not None and grant is not None):
        scope = turn.live_scope_for(branch)
        turn_id = scope.turn_id if scope is not None else None
        if wanted:
            emit(
                branch,
                MessageAdded(
                    branch_id=branch.id, branch_name=branch.name, message=message, turn_id=turn_id
                ),
            )
        if grant is not None and isinstance(message, AssistantResponse):
            for signal in observe(
                grant, message.text, branch_id=branch.id, branch_name=branch.name, turn_id=turn_id
            ):
                emit(branch, signal)
    hooks = actor.hooks  # an ``active`` bus only: no payload is built for nobody
    if hooks is not None and getattr(hooks, "active", True):
        fire_hook(branch, "message_added", {"branch": branch, "message": message})


def emit(branch: ServedBranch, signal: Signal) -> None:
    """Deliver ``signal`` to the observer; its async subscribers join the turn's drain."""
    observer = branch.actor.observer
    if observer is None:
        return
    try:
        pending = observer.dispatch(signal)
    except Exception:
        log.exception("observer failed on %s of branch %r", type(signal).__name__, branch.name)
        return
    if pending is not None:
        _spawn(branch, pending, type(signal).__name__)


async def emit_lifecycle(branch: ServedBranch, signal: Signal) -> None:
    """Deliver a lifecycle signal and wait for its async subscribers.

    The wait is bounded by ``FINALIZE_GRACE``: a subscriber that does not
    finish by then is cancelled (and logged), so none can hold a turn.
    """
    pending = dispatch_lifecycle(branch, signal)
    if pending is not None:
        await await_lifecycle(branch, signal, pending)


def dispatch_lifecycle(branch: ServedBranch, signal: Signal) -> Any:
    """The synchronous half of `emit_lifecycle`: deliver ``signal`` now and
    return the awaitable of its async subscribers, or None (nothing to wait for)."""
    observer = branch.actor.observer
    if observer is None:
        return None
    try:
        return observer.dispatch(signal)
    except Exception:
        log.exception("observer failed on %s of branch %r", type(signal).__name__, branch.name)
        return None


async def await_lifecycle(branch: ServedBranch, signal: Signal, pending: Any) -> None:
    """The waiting half of `emit_lifecycle`: ``pending``, bounded by ``FINALIZE_GRACE``."""
    name = branch.name
    what = f"async observers of {type(signal).__name__} of branch {name!r}"
    try:
        await turn.await_bounded(pending, what, log)
    except Exception:
        log.exception("observer failed on %s of branch %r", type(signal).__name__, name)


def fire_hook(branch: ServedBranch, point: str, payload: Mapping[str, Any]) -> None:
    """Fire a non-blocking hook point; async handlers join the turn's signal drain.

    Raises:
        Escalate: a handler escalated (a hook may hand the branch to its
            supervisor, as a tool can); any other failure is logged.
    """
    hooks = branch.actor.hooks
    if hooks is None:
        return
    try:
        pending = hooks.emit(point, payload)
    except Escalate:
        raise
    except Exception:
        log.exception("hook %s of branch %r failed", point, branch.name)
        return
    if pending is not None:
        _spawn(branch, pending, f"hook {point}")


async def run_hook(branch: ServedBranch, point: str, payload: Mapping[str, Any]) -> None:
    """Run a hook point and wait for it; exceptions propagate (blocking points)."""
    hooks = branch.actor.hooks
    if hooks is None:
        return
    pending = hooks.emit(point, payload)
    if pending is not None:
        await pending


def _spawn(branch: ServedBranch, pending: Any, what: str) -> None:
    scope = turn.live_scope_for(branch)
    if scope is not None and scope.state.host is not None:
        # The turn's task group logs a failure and records an Escalate,
        # which then escalates the turn.
        scope.state.signal_group().start_soon(_awaited, pending)
        return
    nursery = branch.actor.host
    name = branch.name
    if nursery is None:
        pending.close()
        log.warning(
            "branch %r: async subscribers of %s dropped (no running actor to host them)",
            name,
            what,
        )
        return
    nursery.start_soon(_isolated, pending, f"{what} of branch {name!r}")


async def _awaited(pending: Any) -> None:
    await pending


async def _isolated(pending: Any, what: str) -> None:
    # Outside a turn there is nothing to escalate: an Escalate is a failure like
    # any other, logged, so it cannot take the host nursery (the supervisor's) down.
    try:
        await pending
    except Exception:
        log.exception("async subscriber of %s failed", what)
