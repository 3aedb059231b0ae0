"""The turn view: everything an operation sees of the branch and the turn it runs in.

An operation is ``async def op(turn: TurnView, command) -> result``. The view
is the whole interface between the algorithms in this package and the actor
runtime that runs them (`pride.actors`, which implements it): the
conversation, the tool registry, the models of this turn, the context
providers, the stream consumer and loop control, and two effects.

The effects are where an operation reaches outside itself, and each passes
through one place of the view:

* `TurnView.call_model` is every model call: hooks, token streaming,
  usage on the turn, the call log;
* `TurnView.call_tools` is every batch of tool calls, each call of it
  passing the view's per-call checks (the blocking ``before_tool_call`` hook)
  and records (the call log, ``after_tool_call``/``tool_call_error`` hooks).

Recording a message (`TurnView.add_message`) tells observers, hooks and
listeners, so an operation never signals anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from ..llm import ModelRequest, ModelResponse, iModel
    from ..messages import ActionCall, Instruction, RoledMessage
    from ..messages.history import History
    from ..tools import ActionManager, ActionOutcome

__all__ = ["TurnView"]

_M = TypeVar("_M", bound="RoledMessage")


class TurnView(Protocol):
    """What an operation needs of its branch and turn (see the module docstring).

    Outside a model turn (an ``Act`` served from the mailbox) there is no turn:
    ``turn_id`` is None, nothing streams, loop control and context providers
    do nothing, and usage is not counted.
    """

    @property
    def name(self) -> str:
        """The branch's name (for log lines)."""
        ...

    @property
    def id_str(self) -> str:
        """The branch's id as text (sender and recipient of its messages)."""
        ...

    @property
    def user(self) -> str | None:
        """Who the conversation is with."""
        ...

    @property
    def messages(self) -> History:
        """The recorded conversation (read it; record with `add_message`)."""
        ...

    @property
    def acts(self) -> ActionManager:
        """The tool registry (schemas to offer; execution goes through `call_tools`)."""
        ...

    @property
    def turn_id(self) -> UUID | None:
        """The id of the turn, or None outside one."""
        ...

    @property
    def streaming(self) -> bool:
        """True when a ``pride.stream`` consumer receives this view's items."""
        ...

    @property
    def provider_blocks(self) -> tuple[str, ...]:
        """The context providers' text for this turn's requests (see `gather_context`)."""
        ...

    def model(self, spec: Any = None, *, parse: bool = False) -> iModel:
        """The model for a call: ``spec`` (a per-call override) or the turn's model.

        A top-level override becomes the turn's model snapshot; it never changes
        the branch's configured model. ``parse`` picks the parse model instead.

        Raises:
            TypeError, ValueError: ``spec`` does not describe a model.
        """
        ...

    def add_message(self, message: _M) -> _M:
        """Record ``message`` in the conversation (observers, hooks and listeners are told)."""
        ...

    async def gather_context(self, instruction: Instruction) -> None:
        """Run the context providers for this turn, once, before its first request."""
        ...

    async def writeback_context(self, responses: Sequence[Any]) -> None:
        """Let the context providers keep what tool calls produced."""
        ...

    async def call_model(
        self,
        model: iModel,
        request: ModelRequest,
        *,
        stream_tokens: bool = True,
        control: bool = False,
    ) -> ModelResponse:
        """Call ``model``: the one place every model call of a turn goes through.

        Args:
            stream_tokens: stream text chunks to the consumer, when there is one.
            control: check loop control after each streamed chunk.

        Raises:
            ProviderError: the call failed (after the model's retries).
            StopStream: the consumer left, or a CANCEL directive (``control``).
            LoopBreak: a BREAK directive (``control``).

        Cancellation: an in-flight call is aborted (its HTTP stream closed).
        """
        ...

    async def call_tools(
        self,
        calls: Sequence[ActionCall],
        *,
        strategy: Literal["concurrent", "sequential"] = "concurrent",
        max_concurrent: int | None = None,
        call_ids: Sequence[str] | None = None,
    ) -> list[ActionOutcome]:
        """Execute tool calls: the one place every tool call of a turn goes through.

        A running tool's progress reports become ``ToolProgress`` signals (and
        stream items when the turn streams), naming the call by its entry in
        ``call_ids`` (default: its ``call_id``).

        Returns one outcome per call, in call order; a failed or denied call is
        an outcome with ``error`` set (see
        [`ActionManager.execute`][pride.tools.ActionManager.execute]).

        Raises:
            Escalate: a tool or hook escalated.
            ValueError: ``strategy`` or ``max_concurrent`` is invalid.
        """
        ...

    async def emit(self, item: Any) -> None:
        """Hand ``item`` to the stream consumer (a checkpoint when there is none).

        Raises:
            StopStream: the consumer has gone.
        """
        ...

    def check_control(self) -> None:
        """Act on the turn's pending loop directive (BREAK raises LoopBreak,
        CANCEL raises StopStream); nothing outside a turn."""
        ...

    def nested(self, *, stream_tokens: bool = True) -> TurnView:
        """A view of the same turn for a step inside this operation (ReAct's rounds).

        The nested view never replaces the turn's model snapshot; without
        ``stream_tokens`` it streams nothing.
        """
        ...
