"""How a branch's actor runs an operation: the turn view it hands the operation.

`BranchTurn` implements `pride.operations.TurnView` over a
branch and its turn scope. It is the one place where what an operation does
reaches the runtime:

* `BranchTurn.call_model`: every model call of every verb, with the
  budget check before it (`pride.budget.accounts`), the
  ``before_model_call``/``model_stream_chunk``/``after_model_call`` hooks,
  token streaming to the turn's consumer, usage on the turn (``RunEnd``) and
  on the branch and session, and the call log;
* `BranchTurn.call_tools`: every batch of tool calls; each call passes
  `BranchTurn.before_tool_call` (the blocking hook that may deny it), the
  budget check and count (`BranchTurn.around_tool_call`) and
  `BranchTurn.after_tool_call` (the call log, the after/error hooks);
* `BranchTurn.gather_context`: the context providers, once per turn.

When the turn keeps a journal (`pride.actors.journaling`), both effects ask it
first: a step the journal holds is answered from it (a resumed turn), and
every step made live is recorded in it.

The call itself (hooks, streaming, the call log) is
`pride.actors.model_call`; which operation serves a command, and running it
over this view, is `pride.actors.dispatch`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from uuid import UUID

import attrs
import trio

from ..budget.accounts import Meter
from ..errors import InvalidMessage
from ..llm import ModelRequest, ModelResponse, iModel
from ..messages import (
    ActionCall,
    Instruction,
    ReasoningDelta,
    RoledMessage,
    Signal,
    ToolProgress,
)
from ..messages.commands import ModelName
from ..tools import ActionOutcome
from . import wiring
from .instrument import TurnTrace
from .journaling import refuse_approvals
from .model_call import call_model_once, unique_call_ids
from .turn import TurnScope

if TYPE_CHECKING:
    from ..messages.history import History
    from ..operations import TurnView
    from ..tools import ActionManager
    from .actor import ServedBranch

__all__ = ["BranchTurn"]

_M = TypeVar("_M", bound=RoledMessage)


log = logging.getLogger("pride.context")


class BranchTurn:
    """A branch's turn as its operations see it (a `TurnView`).

    ``scope`` is None for an ``Act`` served outside any turn: no turn id, no
    streaming, no loop control, no context providers, no turn usage (its
    ``meter``, if given, still counts its tool calls and applies its budget).
    """

    __slots__ = (
        "_branch",
        "_meter",
        "_progress",
        "_scope",
        "_trace",
        "acts",
        "id_str",
        "messages",
        "user",
    )

    def __init__(
        self,
        branch: ServedBranch,
        scope: TurnScope | None,
        meter: Meter | None = None,
        progress: trio.MemorySendChannel[Any] | None = None,
        trace: TurnTrace | None = None,
    ) -> None:
        self._branch = branch
        self._scope = scope
        self._meter = meter if meter is not None or scope is None else scope.allowance
        # Where ToolProgress items go: the turn's consumer, even from a nested
        # step that streams no tokens (ReActStream's rounds stream only results).
        self._progress = progress if progress is not None or scope is None else scope.stream
        self._trace = trace if trace is not None or scope is None else scope.state.trace
        self.messages: History = branch.messages
        """The recorded conversation."""
        self.acts: ActionManager = branch.acts
        """The tool registry."""
        # Read once: the operations read them for every message they make.
        self.id_str: str = branch.id_str
        """The branch's id as text."""
        self.user: str | None = branch.user
        """Who the conversation is with (as the turn began)."""

    # ------------------------------------------------------------ what it reads

    @property
    def name(self) -> str:
        """The branch's name."""
        return self._branch.name

    @property
    def turn_id(self) -> UUID | None:
        """The turn's id, None outside a turn."""
        return self._scope.turn_id if self._scope is not None else None

    @property
    def streaming(self) -> bool:
        """True when a stream consumer receives this view's items."""
        return self._scope is not None and self._scope.stream is not None

    @property
    def provider_blocks(self) -> tuple[str, ...]:
        """The context providers' text for this turn's requests."""
        return self._scope.state.context.provider_blocks if self._scope is not None else ()

    def model(self, spec: Any = None, *, parse: bool = False) -> iModel:
        """An override spec, else the turn's snapshot (see ``TurnView.model``).

        Raises:
            InvalidMessage: ``spec`` is a `ModelName`
                (a model named by a command decoded from outside) that names none
                of the models the branch holds.
        """
        scope = self._scope
        if isinstance(spec, ModelName):
            model = self._offered(spec)
            if scope is not None and scope.owns_lifecycle and not parse:
                scope.state.context.model = model
            return model
        if spec is not None:
            model = iModel.from_spec(spec)
            if scope is not None and scope.owns_lifecycle and not parse:
                scope.state.context.model = model
            return model
        if parse:
            return self._branch.parse_model
        if scope is not None:
            snapshot: iModel = scope.state.context.model
            return snapshot
        return self._branch.chat_model

    def _offered(self, name: ModelName) -> iModel:
        """The model called ``name`` among those the application gave the branch: its
        chat model (the turn's snapshot too) and its parse model. Never a new one:
        a name from outside must not pick an endpoint or a key (what pride trusts)."""
        branch = self._branch
        models = [branch.chat_model, branch.parse_model]
        if self._scope is not None:
            models.insert(0, self._scope.state.context.model)
        for model in models:
            if name in (f"{model.provider}/{model.model}", model.model):
                return model
        offered = ", ".join(sorted({f"{model.provider}/{model.model}" for model in models}))
        raise InvalidMessage(
            [
                (
                    name.field or "model",
                    f"no model named {str(name)!r} is made available by branch {branch.name!r} "
                    f"(it offers: {offered})",
                )
            ]
        )

    def add_message(self, message: _M) -> _M:
        """Record ``message`` on the branch."""
        self._branch.add_message(message)
        return message

    def nested(self, *, stream_tokens: bool = True) -> BranchTurn:
        """The same turn for a step inside the operation (never its lifecycle owner)."""
        scope = self._scope
        if scope is None:
            return self
        stream = scope.stream if stream_tokens else None
        nested = TurnScope(scope.state, owns_lifecycle=False, stream=stream, meter=scope.meter)
        return BranchTurn(self._branch, nested, progress=self._progress, trace=self._trace)

    # ------------------------------------------------------------ the turn

    async def emit(self, item: Any) -> None:
        """Hand ``item`` to the stream consumer (a checkpoint without one)."""
        if self._scope is None:
            await trio.lowlevel.checkpoint()
            return
        await self._scope.emit(item)

    def check_control(self) -> None:
        """Act on the turn's pending directive; nothing outside a turn."""
        if self._scope is not None:
            self._scope.check_control()

    async def gather_context(self, instruction: Instruction) -> None:
        """Run the branch's context providers for this turn, once (a model call a
        provider makes meanwhile, nested in the turn, gets no blocks).

        No registered providers, or no turn: nothing happens (the report stays
        None). No system message: providers are not invoked; the report lists
        every provider under ``skipped``. Otherwise the registry's report and
        blocks are stored on the turn context, and the report becomes
        ``branch.last_context_report`` when the turn finalises.
        """
        branch = self._branch
        scope = self._scope
        if scope is None or not branch.has_providers:
            return
        registry = branch.providers
        state = scope.state
        context = state.context
        # A provider may ask the branch's model itself: its nested call comes back
        # here before the report is set, and asked the providers again (each a
        # model call, ninety deep until the recursion limit). It gets no blocks.
        if context.provider_report is not None or state.gathering:
            return
        if self._branch.system is None:
            context.provider_report = registry.skipped_report()
            return
        state.gathering = True
        report = await registry.gather(self._branch, instruction)
        context.provider_report = report
        context.provider_blocks = tuple(report.blocks)

    async def writeback_context(self, responses: Sequence[Any]) -> None:
        """After actions produced responses, let providers persist what they learned.

        Not from inside a writeback: a hook may run operate on the branch (inline,
        nested in the turn), and that operate's own writeback called the hooks again,
        from their own call, without bound (each level a model and a tool call, until
        Python's recursion limit). Its responses are not written back (logged)."""
        branch = self._branch
        if not branch.has_providers or all(response is None for response in responses):
            return
        scope = self._scope
        state = scope.state if scope is not None else None
        if state is not None and state.writing_back:
            log.info(
                "branch %r: %d action responses of an operate run by a writeback hook are "
                "not written back (no writeback from inside a writeback)",
                branch.name,
                len(responses),
            )
            return
        if state is not None:
            state.writing_back = True
        try:
            await branch.providers.gather_writeback(branch, list(responses))
        finally:
            if state is not None:
                state.writing_back = False

    # ------------------------------------------------------------ model calls

    async def call_model(
        self,
        model: iModel,
        request: ModelRequest,
        *,
        stream_tokens: bool = True,
        control: bool = False,
    ) -> ModelResponse:
        """Call ``model``; stream text chunks to the turn's consumer when there is one.

        Raises:
            BudgetExceeded: the turn's (or session's) allowance is spent, before
                the call; or the call's usage passed a token or cost limit (its
                reply is not returned); or a streamed reply ran past
                ``max_output_tokens`` (the stream is cut).
            ProviderError: the provider call failed (after the model's retries).
            StopStream: the stream consumer left, or a CANCEL directive (``control``).
            LoopBreak: a BREAK directive (``control``).

        Cancellation: an in-flight call is aborted (its HTTP stream closed).
        """
        meter = self._meter
        scope = self._scope
        run = scope.state.journal if scope is not None else None
        if run is not None:  # the journal answers a step it holds (a resumed turn)
            step, replayed = run.take_model_step()
            if replayed is not None:
                return await self._replayed(replayed, stream_tokens=stream_tokens)
            if run.uncommitted:  # the steps before it are durable first
                await run.commit()
        if meter is not None:  # the budget last before the call: what it admits is made
            meter.admit_model_call()
        streaming = stream_tokens and scope is not None and scope.stream is not None
        trace = self._trace
        if trace is None:  # called directly: every verb's model call passes here
            response = await call_model_once(
                self._branch, scope, meter, model, request, streaming=streaming, control=control
            )
        else:
            with trace.model_call(model, request, streaming=streaming) as span:
                response = await call_model_once(
                    self._branch, scope, meter, model, request, streaming=streaming, control=control
                )
                span.response(response)
        if run is not None:
            run.model_replied(step, response)
        if meter is not None:  # last: a reply past a token or cost limit is not returned
            meter.add_usage(response.usage)
        return response

    async def _replayed(self, response: ModelResponse, *, stream_tokens: bool) -> ModelResponse:
        """A model call the journal answered: it counts for the turn (``RunEnd.usage``,
        the turn's budget) but not again for the branch or the session, which
        counted it when it ran (`pride.budget.accounts`); its reasoning (a
        [`ReasoningDelta`][pride.ReasoningDelta] per block) and its text go to a
        stream consumer, each in one piece; no hooks, no call.

        Raises:
            BudgetExceeded: the turn's own allowance is spent.
        """
        scope = self._scope
        assert scope is not None
        if response.tool_calls:  # unique already: the turn learns the ids its rounds used
            response = unique_call_ids(scope, response)
        meter = self._meter
        if meter is not None:
            meter.admit_model_call(replayed=True)
            meter.add_usage(response.usage, replayed=True)
        streaming = stream_tokens and scope.stream is not None
        if streaming:
            for block in response.reasoning:
                if block.reasoning:
                    await scope.emit(ReasoningDelta(block.reasoning, provider=block.provider))
        if streaming and response.text:
            await scope.emit(response.text)
        else:
            await trio.lowlevel.checkpoint()
        return response

    def signal(self, signal: Signal) -> None:
        """Deliver ``signal`` (its branch fields filled in) to the branch's observer."""
        branch = self._branch
        wiring.emit(branch, attrs.evolve(signal, branch_id=branch.id, branch_name=branch.name))

    # ------------------------------------------------------------ tool calls

    async def call_tools(
        self,
        calls: Sequence[ActionCall],
        *,
        strategy: Literal["concurrent", "sequential"] = "concurrent",
        max_concurrent: int | None = None,
        call_ids: Sequence[str] | None = None,
    ) -> list[ActionOutcome]:
        """Execute ``calls`` through the branch's tools; one outcome per call, in order.

        Each call passes `before_tool_call` first, `around_tool_call` around
        the tool itself, and `after_tool_call` with its outcome; its progress
        reports go to `tool_progress`, naming it by its entry in ``call_ids``
        (default: its ``call_id``).

        Raises:
            Escalate: a tool or hook escalated.
            ValueError: ``strategy`` or ``max_concurrent`` is invalid.
            ApprovalRequired: a call waits for a person (journaled turns only).

        A call refused by the budget has a ``BudgetExceeded`` error outcome,
        and the turn is stopped (its cancel scope cancelled). Where no turn
        can wait (an ``Act`` served on its own), a call of a tool that
        ``requires_approval`` is refused: ``denied: ...``, never run.
        """
        scope = self._scope
        run = scope.state.journal if scope is not None else None
        if run is not None:  # answered from the journal, run, or waiting for approval

            async def execute(chosen: Sequence[ActionCall], **hooks: Any) -> list[ActionOutcome]:
                return await self._execute(chosen, strategy, max_concurrent, **hooks)

            return await run.tool_steps(self, calls, execute, call_ids)
        hooked = self._branch.actor.hooks is not None
        before: Callable[[ActionCall], Awaitable[None]] | None = (
            self.before_tool_call if hooked else None
        )
        if self.acts.needs_approval:  # nothing here can wait for a person: refused
            before = refuse_approvals(self.acts, before)
        return await self._execute(
            calls,
            strategy,
            max_concurrent,
            before=before,
            after=self.after_tool_call,
            call_ids=call_ids,
        )

    async def _execute(
        self,
        calls: Sequence[ActionCall],
        strategy: Literal["concurrent", "sequential"],
        max_concurrent: int | None,
        *,
        before: Any,
        after: Any,
        call_ids: Sequence[str] | None,
    ) -> list[ActionOutcome]:
        async def progress(
            call: ActionCall, done: float, total: float | None, message: str | None
        ) -> None:
            index = next(index for index, candidate in enumerate(calls) if candidate is call)
            call_id = call_ids[index] if call_ids is not None else call.call_id
            await self.tool_progress(call, call_id, done, total, message)

        return await self.acts.execute(
            calls,
            strategy=strategy,
            max_concurrent=max_concurrent,
            before_call=before,
            after_call=after,
            on_progress=progress,
            around_call=self.around_tool_call if self._meter is not None else None,
        )

    def replayed_tool_call(self) -> None:
        """A tool call the journal answered counts for the turn (not again for the
        branch or the session, which counted it when it ran).

        Raises:
            BudgetExceeded: the turn's own allowance is spent.
        """
        if self._meter is not None:
            self._meter.admit_tool_call(replayed=True)

    async def around_tool_call(self, call: ActionCall, invoke: Callable[[], Any]) -> Any:
        """Runs around each tool call the hooks let through: the budget's check and
        count, and the call's trace span.

        Raises:
            BudgetExceeded: the allowance is spent; the tool is not called.
        """
        meter = self._meter
        if meter is not None:
            meter.admit_tool_call()
        trace = self._trace
        if trace is None:
            return await invoke()
        tool = self.acts.get(call.function)
        with trace.tool_call(call, tool.description if tool is not None else None) as span:
            output = await invoke()
            span.result(output)
            return output

    async def before_tool_call(self, call: ActionCall) -> None:
        """Runs before each tool call: the blocking ``before_tool_call`` hook.

        Raises:
            Exception: a handler denied the call (it is not run; its outcome
                says ``denied: ...``).
        """
        branch = self._branch
        await wiring.run_hook(branch, "before_tool_call", {"branch": branch, "call": call})

    async def tool_progress(
        self,
        call: ActionCall,
        call_id: str | None,
        done: float,
        total: float | None,
        message: str | None,
    ) -> None:
        """A running tool reported progress: a ``ToolProgress`` signal to the
        observer, and an item to the stream consumer when the turn streams."""
        branch = self._branch
        signal = ToolProgress(
            branch_id=branch.id,
            branch_name=branch.name,
            turn_id=self.turn_id,
            call_id=call_id,
            function=call.function,
            progress=done,
            total=total,
            message=message,
        )
        wiring.emit(branch, signal)
        if self._progress is not None:
            # A consumer that left ends the stream at the next result item, not here.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._progress.send(signal)

    async def after_tool_call(self, outcome: ActionOutcome) -> None:
        """Runs after each tool call: the call log, then the after/error hook."""
        branch = self._branch
        branch.logs.record_measured(
            "tool",
            outcome.function,
            started_at=time.time() - outcome.duration,
            duration_ms=outcome.duration * 1000.0,
            status="ok" if outcome.succeeded else "error",
            turn_id=self.turn_id,
            error_type=outcome.error.split(":", 1)[0] if outcome.error else None,
        )
        if branch.actor.hooks is not None:
            point = "after_tool_call" if outcome.succeeded else "tool_call_error"
            wiring.fire_hook(branch, point, {"branch": branch, "outcome": outcome})


if TYPE_CHECKING:

    def _implements_turn_view(turn: BranchTurn) -> TurnView:
        return turn  # mypy checks here that BranchTurn implements the TurnView protocol
