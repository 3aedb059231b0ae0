"""The action manager: a branch's tool registry and the executor of tool calls.

Errors are responses. A tool that raises, a call to a tool that does not
exist, arguments that do not fit, a call the ``before_call`` hook denies: each
becomes an [`ActionOutcome`][pride.tools.ActionOutcome] with an ``error`` string, because the model
can read that and correct itself, and one bad call must not sink the turn
(lionagi does the same with ``suppress_errors=True``, its default).

Three things do propagate, because they are not about the call:

* `trio.Cancelled`: the caller (the turn) is being cancelled;
* [`pride.Escalate`][pride.Escalate], raised by a tool or a hook: "this branch's state is
  not to be trusted", which DESIGN.md routes to the branch's supervisor;
* ``KeyboardInterrupt``.

Any other ``BaseException`` a tool raises is a failed call (a `ToolError`
caused by it): the model's arguments reach trusted code that answers bad
input with one (argparse's ``sys.exit(2)``, asyncio's ``CancelledError`` in a
sync tool), and letting it through took the whole session down.

Each propagates as itself. Concurrent calls run in a nursery, which reports
its children's exceptions as an exception group;
[`ActionManager.execute`][pride.tools.ActionManager.execute]
unwraps it, so callers never see a group they did not ask for.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, TypeGuard

import trio

from ..errors import Escalate, ToolError, exception_leaves
from ..messages.commands import ActionCall
from ._outcome import ActionOutcome
from ._progress import ProgressSink, bind_progress, unbind_progress
from ._tool import Tool

__all__ = ["ActionManager", "AfterCall", "AroundCall", "BeforeCall", "Strategy"]

logger = logging.getLogger("pride.tools")

Strategy: TypeAlias = Literal["concurrent", "sequential"]
BeforeCall: TypeAlias = Callable[[ActionCall], Awaitable[None] | None]
"""Runs before each call; raising denies the call (``error="denied: ..."``)."""
AfterCall: TypeAlias = Callable[[ActionOutcome], Awaitable[None] | None]
"""Runs after each call with its outcome; its failures are logged and ignored."""
AroundCall: TypeAlias = Callable[[ActionCall, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""Wraps each call's invocation: ``await around_call(call, invoke)`` returns what
``await invoke()`` returns (the tool's output), or raises as the call's error."""


class ToolSource(Protocol):
    """Something that registers tools of its own in a manager (an MCP server handle)."""

    def register_with(self, acts: ActionManager) -> tuple[str, ...]: ...


ToolLike: TypeAlias = Tool | Callable[..., Any] | ToolSource


class ActionManager:
    """A branch's tools, by name, in registration order, and how to run calls to them.

    Usage:

    ```python
    manager = ActionManager([add, search])
    manager.schemas()                 # what to offer the model
    outcomes = await manager.execute([ActionCall("add", {"a": 1, "b": 2})])
    outcomes[0].output                # 3
    ```

    Iterating yields the [`Tool`][pride.tools.Tool] objects; ``name in manager`` and
    ``tool in manager`` both work. An empty manager is falsy.

    Args:
        tools: Tools to register at once (see [`register`][pride.tools.ActionManager.register]).
    """

    def __init__(self, tools: ToolLike | Iterable[ToolLike] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        # Tools with requires_approval (read on every turn), kept as tools come and go:
        # recounting them all at each registration made registering N tools O(N**2).
        self._approvals = 0
        self.register(tools)

    # ------------------------------------------------------------ registry

    def register(self, tools: ToolLike | Iterable[ToolLike], *, update: bool = False) -> None:
        """Add a [`Tool`][pride.tools.Tool], a callable (made a ``Tool(fn)``), a tool
        source, or an iterable of them.

        A tool source is an object that registers tools of its own and keeps
        them in step with where they come from: an MCP server handle
        (``session.mcp("files")``), whose every tool is registered as
        ``branch.register_mcp(server)`` registers it. Sources are registered
        after the other items.

        Registration is all or nothing for the Tools and callables: if any of
        them fails, nothing is added (and no source is registered).

        Args:
            tools: What to register.
            update: Replace a registered tool of the same name instead of failing.

        Raises:
            ValueError: a name is already registered (or repeated in ``tools``)
                and ``update`` is False; or a callable's name is invalid.
            TypeError: an item is neither a Tool nor a callable, or cannot be
                made into a tool (see [`Tool`][pride.tools.Tool]).
        """
        items: Iterable[Any]
        if isinstance(tools, Tool) or callable(tools) or _is_source(tools):
            items = (tools,)
        elif isinstance(tools, Iterable):
            items = tools
        else:
            raise TypeError(
                f"cannot register {tools!r}: expected a Tool, a callable or an iterable"
            )
        batch: dict[str, Tool] = {}
        sources: list[ToolSource] = []
        for item in items:
            if _is_source(item):
                sources.append(item)
                continue
            if not (isinstance(item, Tool) or callable(item)):
                raise TypeError(f"cannot register {item!r}: expected a Tool or a callable")
            new = item if isinstance(item, Tool) else Tool(item)
            if not update and (new.name in self._tools or new.name in batch):
                raise ValueError(
                    f"a tool named {new.name!r} is already registered; "
                    "pass update=True to replace it"
                )
            batch[new.name] = new
        for name, tool in batch.items():
            replaced = self._tools.get(name)
            if replaced is not None:
                self._approvals -= replaced.requires_approval
            self._approvals += tool.requires_approval
        self._tools.update(batch)
        for source in sources:
            source.register_with(self)

    def unregister(self, name: str) -> Tool:
        """Remove the tool called ``name`` and return it.

        Raises:
            KeyError: no tool has that name.
        """
        try:
            removed = self._tools.pop(name)
        except KeyError:
            raise KeyError(self._unknown(name)) from None
        self._approvals -= removed.requires_approval
        return removed

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._tools)

    @property
    def tools(self) -> Mapping[str, Tool]:
        """A read-only live view: name → [`Tool`][pride.tools.Tool]."""
        return MappingProxyType(self._tools)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        return isinstance(item, str) and item in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(tuple(self._tools.values()))

    def __repr__(self) -> str:
        return f"ActionManager(names={self.names!r})"

    @property
    def needs_approval(self) -> bool:
        """True when a registered tool has ``requires_approval`` (its calls wait for a
        person, so the branch's turns keep a journal even without a store)."""
        return self._approvals > 0

    def schemas(self, selection: bool | Iterable[str] = True) -> tuple[dict[str, Any], ...]:
        """The neutral schemas (``Tool.schema()``) of the selected tools.

        Args:
            selection: A [`ToolSelection`][pride.messages.commands.ToolSelection]: True
                for every tool (registration order), False for none, or tool
                names (in the order given; a single string is one name).

        Raises:
            KeyError: a selected name is not registered.
        """
        return tuple(tool.schema() for tool in self.select(selection))

    def select(self, selection: bool | Iterable[str] = True) -> tuple[Tool, ...]:
        """The tools a [`ToolSelection`][pride.messages.commands.ToolSelection] picks.

        Raises:
            KeyError: a selected name is not registered.
        """
        if selection is True:
            return tuple(self._tools.values())
        if selection is False:
            return ()
        names = (selection,) if isinstance(selection, str) else tuple(selection)
        missing = [name for name in names if name not in self._tools]
        if missing:
            raise KeyError(self._unknown(missing[0]))
        return tuple(self._tools[name] for name in names)

    def _unknown(self, name: str) -> str:
        known = ", ".join(self._tools) or "none"
        return f"no tool named {name!r} is registered (registered: {known})"

    # ------------------------------------------------------------ execution

    async def execute(
        self,
        calls: Iterable[ActionCall],
        *,
        strategy: Strategy = "concurrent",
        max_concurrent: int | None = None,
        before_call: BeforeCall | None = None,
        after_call: AfterCall | None = None,
        on_progress: ProgressSink | None = None,
        around_call: AroundCall | None = None,
    ) -> list[ActionOutcome]:
        """Run tool calls and return one outcome per call, in the order of ``calls``.

        ``"concurrent"`` runs the calls as tasks of a nursery opened here, so
        inside a turn they belong to the turn's task tree; ``max_concurrent``
        caps how many run at once (a `trio.CapacityLimiter`; None: no
        cap). ``"sequential"`` runs them one after another, in order.

        For each call: the tool is looked up (in a snapshot of the registry
        taken when ``execute`` starts), ``before_call(call)`` runs, the
        arguments are validated and the tool is invoked, then
        ``after_call(outcome)`` runs. Hooks may be sync or async; sync hooks run
        in the event loop and must not block.

        Args:
            calls: The calls, e.g. a model's tool calls.
            strategy: ``"concurrent"`` (default) or ``"sequential"``.
            max_concurrent: At most this many calls at once (concurrent only).
            before_call: Runs before each call; if it raises, that call is
                denied: not executed, and its outcome's error is
                ``"denied: <message>"``.
            after_call: Runs after each call, failed or not; an exception it
                raises is logged to ``pride.tools`` and otherwise ignored.
            on_progress: Receives ``(call, progress, total, message)`` each
                time a running tool calls `report_progress`
                (an MCP tool does for each progress notification).
            around_call: Wraps each invocation, after ``before_call`` let it
                through: ``await around_call(call, invoke)`` must return
                ``await invoke()`` (or a result standing for it) and may raise
                instead, which is that call's error. The one place to run code
                around the tool itself: a trace span, a budget's count.

        Returns:
            One [`ActionOutcome`][pride.tools.ActionOutcome] per call, in call order. A failed call
            (the tool raised, unknown name, invalid arguments, denied) is an
            outcome with ``error`` set; it never raises out of here.

        Raises:
            ValueError: ``strategy`` or ``max_concurrent`` is invalid.
            pride.Escalate: a tool or hook escalated; other running calls are
                cancelled first.

        Cancellation: cancelling the caller cancels every running call (a sync
        tool's thread is waited for, see [`Tool.invoke`][pride.Tool.invoke]); no outcomes are
        returned and `trio.Cancelled` propagates, as itself, never
        inside an exception group.
        """
        if strategy not in ("concurrent", "sequential"):
            raise ValueError(f"strategy must be 'concurrent' or 'sequential', got {strategy!r}")
        if max_concurrent is not None and (
            isinstance(max_concurrent, bool)
            or not isinstance(max_concurrent, int)
            or max_concurrent < 1
        ):
            raise ValueError(
                f"max_concurrent must be a positive int or None, got {max_concurrent!r}"
            )
        batch = _Batch(dict(self._tools), before_call, after_call, on_progress, around_call)
        calls = tuple(calls)
        await trio.lowlevel.checkpoint()
        try:
            if strategy == "sequential" or len(calls) <= 1:
                return [await batch.run(call) for call in calls]
            return await batch.run_concurrently(calls, max_concurrent)
        except BaseExceptionGroup as group:
            error = _one_exception(group)
        try:  # its traceback holds this frame: no cycle through the local
            raise error
        finally:
            del error


class _Batch:
    """One ``execute`` call: the registry snapshot, the hooks, and how to run a call."""

    def __init__(
        self,
        tools: dict[str, Tool],
        before_call: BeforeCall | None,
        after_call: AfterCall | None,
        on_progress: ProgressSink | None = None,
        around_call: AroundCall | None = None,
    ) -> None:
        self.tools = tools
        self.before_call = before_call
        self.after_call = after_call
        self.on_progress = on_progress
        self.around_call = around_call

    async def run_concurrently(
        self, calls: Sequence[ActionCall], max_concurrent: int | None
    ) -> list[ActionOutcome]:
        outcomes: list[ActionOutcome | None] = [None] * len(calls)
        limiter = None if max_concurrent is None else trio.CapacityLimiter(max_concurrent)

        async def run_into(index: int, call: ActionCall) -> None:
            if limiter is None:
                outcomes[index] = await self.run(call)
            else:
                async with limiter:
                    outcomes[index] = await self.run(call)

        async with trio.open_nursery() as nursery:
            for index, call in enumerate(calls):
                nursery.start_soon(run_into, index, call, name=f"pride.tools:{call.function}")
        return [outcome for outcome in outcomes if outcome is not None]

    async def run(self, call: ActionCall) -> ActionOutcome:
        """Run one call to its outcome; see
        [`ActionManager.execute`][pride.tools.ActionManager.execute]."""
        started = trio.current_time()
        output, exception, denied = await self._call(call)
        if exception is None:
            exception = _unshowable(call.function, output)
            if exception is not None:
                output = None
        error = None
        if exception is not None:
            error = f"denied: {_message(exception)}" if denied else _describe(exception)
        result = ActionOutcome(
            function=call.function,
            arguments=dict(call.arguments) if isinstance(call.arguments, Mapping) else {},
            call_id=call.call_id,
            output=output,
            error=error,
            started_at=started,
            duration=trio.current_time() - started,
            exception=exception,
        )
        await self._after(result)
        return result

    async def _call(self, call: ActionCall) -> tuple[Any, Exception | None, bool]:
        """``(output, exception, denied)`` for one call; only escalations raise."""
        tool = self.tools.get(call.function)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return None, ToolError(f"no tool named {call.function!r} (available: {known})"), False
        if self.before_call is not None:
            try:
                await _maybe_await(self.before_call(call))
            except Exception as exc:
                if _escalates(exc):
                    raise
                return None, exc, True
        token = None if self.on_progress is None else bind_progress(call, self.on_progress)
        try:
            if self.around_call is None:
                return await tool.invoke(call.arguments), None, False
            invoke = partial(tool.invoke, call.arguments)
            return await self.around_call(call, invoke), None, False
        except Exception as exc:
            if _escalates(exc):
                raise
            return None, exc, False
        except BaseException as exc:
            if _propagates(exc):
                raise
            # argparse's sys.exit(2) on the model's arguments, asyncio's CancelledError
            # in a sync tool, a library's own: the call failed, the branch did not.
            return None, _not_an_exception(call.function, exc), False
        finally:
            if token is not None:
                unbind_progress(token)

    async def _after(self, result: ActionOutcome) -> None:
        if self.after_call is None:
            return
        try:
            await _maybe_await(self.after_call(result))
        except Exception as exc:
            if _escalates(exc):
                raise
            logger.exception(
                "after_call hook failed for tool call %r (call_id=%s); the outcome stands",
                result.function,
                result.call_id,
            )


def _is_source(item: Any) -> TypeGuard[ToolSource]:
    """A tool source: registers its own tools (``register_with(manager)``), e.g. an MCP server."""
    return not isinstance(item, Tool) and callable(getattr(item, "register_with", None))


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


def _text(exc: BaseException) -> str:
    """``str(exc)``, or what is known of it when its ``__str__`` itself raises."""
    try:
        return str(exc)
    except Exception as inner:  # a tool's own exception class: never let it end the turn
        return f"(its message could not be made: {type(inner).__name__})"


def _message(exc: BaseException) -> str:
    return _text(exc) or type(exc).__name__


def _describe(exc: BaseException) -> str:
    """``"<ExcType>: <message>"``, what the model is shown for a failed call."""
    text = _text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _unshowable(function: str, output: Any) -> ToolError | None:
    """A ToolError if ``output`` cannot be shown to the model, else None.

    The model is shown a tool's output as JSON, with ``str()`` for what JSON
    has no form for (as ``ActionResponse`` renders it). An output whose
    ``str()`` raises, or nested beyond the interpreter's recursion limit,
    would fail later, when the response is recorded, and take the turn with
    it; found here, the call is a failed call instead, which the model reads.
    """
    try:
        json.dumps(output, ensure_ascii=False, default=str)
    except Exception as exc:  # str() of a tool's object: anything at all
        return ToolError(
            f"tool {function!r} returned a {type(output).__name__} that cannot be shown "
            f"to the model ({_describe(exc)}); return JSON data or a str"
        )
    return None


def _propagates(exc: BaseException) -> bool:
    """True for what a tool raises that is not about the call: trio's cancellation
    and ``KeyboardInterrupt`` (alone or inside an exception group), an escalation."""
    leaves = exception_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return any(isinstance(leaf, trio.Cancelled | KeyboardInterrupt | Escalate) for leaf in leaves)


def _not_an_exception(function: str, exc: BaseException) -> ToolError:
    """The failed call's error for a BaseException that is not an Exception (its cause)."""
    error = ToolError(
        f"tool {function!r} raised {_describe(exc)} (a BaseException, not an Exception); "
        "the call failed"
    )
    error.__cause__ = exc
    return error


def _escalates(exc: Exception) -> bool:
    """True for [`Escalate`][pride.Escalate], alone or inside an exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(Escalate) is not None
    return isinstance(exc, Escalate)


def _one_exception(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one exception ``execute`` raises for a group from its nursery or a tool.

    An [`Escalate`][pride.Escalate] first, else any other non-Cancelled exception, else a
    `trio.Cancelled` (which the cancel scope that caused it will catch).
    Exceptions not chosen are noted on the chosen one, so nothing is lost.
    """
    leaves = exception_leaves(group)
    ranked = sorted(
        leaves,
        key=lambda exc: (
            0 if isinstance(exc, Escalate) else 2 if isinstance(exc, trio.Cancelled) else 1
        ),
    )
    chosen = ranked[0]
    for other in ranked[1:]:
        if not isinstance(other, trio.Cancelled):
            chosen.add_note(f"raised together with {_describe(other)}")
    return chosen
