"""The mailbox protocol: what callers put in a branch's mailbox.

Two lanes. **Work commands** ([`Chat`][pride.Chat], [`Operate`][pride.Operate], ...) queue in
order and each is served as one turn (``Act`` is served in order but is not a
model turn). **Priority commands** ([`Attach`][pride.Attach], [`Detach`][pride.Detach],
[`Stop`][pride.Stop]) are system messages from a supervisor; the actor takes them
before the next work item, never in the middle of a turn.

Every work command carries its verb's parameters, the instruction (or text)
first and positional:

```python
await pride.ask(branch, Chat("hi", guidance="be brief"))
```

Some fields accept live objects in process but only data on the wire:

* ``chat_model``/``parse_model``/``interpret_model``: ``"provider/model"``, a
  config dict, or an ``iModel`` in process; on the wire only a name, decoded
  as a [`ModelName`][pride.messages.commands.ModelName]: the branch then uses the model of that name
  it
  already has, never a new endpoint or key (see [`ModelName`][pride.messages.commands.ModelName]);
* ``response_format``: a JSON schema dict, or a class (attrs, dataclass,
  TypedDict, pydantic; in process only);
* ``Attach``'s observer, hooks, operation registry and memory are references
  to live objects and do not survive serialisation (they come back as None).

The codec ([`pride.messages.codec`][pride.messages.codec]) refuses to serialise a live object
with an [`InvalidMessage`][pride.InvalidMessage] naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal
from uuid import UUID

import attrs

from .budget import Budget
from .calls import ActionCall, JsonValue, act_calls

__all__ = [
    "Act",
    "ActionCall",
    "Approve",
    "Attach",
    "Call",
    "Chat",
    "ChatAndRecord",
    "Command",
    "Communicate",
    "Decision",
    "Deny",
    "Detach",
    "HandleValidation",
    "Interpret",
    "JsonValue",
    "LiveRef",
    "ModelName",
    "ModelSpec",
    "Operate",
    "Parse",
    "PendingCall",
    "PriorityCommand",
    "ReAct",
    "ReActStream",
    "ResponseFormatSpec",
    "Resume",
    "Run",
    "Stop",
    "ToolSelection",
    "WorkCommand",
]

# Markers the codec recognises (``Annotated`` keeps them ``Any`` for type checkers).
ModelSpec = Annotated[Any, "pride:model"]
"""None, ``"provider/model"``, a model config dict, or (in process) an ``iModel``.

Decoded from the wire: None or a [`ModelName`][pride.messages.commands.ModelName] only."""
ResponseFormatSpec = Annotated[Any, "pride:response_format"]
"""None, a JSON schema dict, or (in process) a class to parse into."""
LiveRef = Annotated[Any, "pride:live"]
"""A reference to a live object; never serialised."""

MODEL_FIELDS = frozenset({"chat_model", "parse_model", "interpret_model", "imodel"})
"""Argument names that pick a model; in a decoded ``Call`` they may only hold a name."""


class ModelName(str):
    """A model picked by name in a command that came from outside (decoded from JSON).

    A command decoded from the wire may choose among the models the
    application made available, never configure a new one: a configuration
    carries a ``base_url``, a provider or a key, and a request line choosing
    those could send the process's API key to a host of its choice. So the
    codec turns every model field of a decoded command into a ``ModelName``
    (and refuses a configuration dict), and the operation that resolves it
    accepts only a model the branch already holds (its chat or parse model),
    matched by ``"provider/model"`` or by model name alone.

    A plain ``str`` (built in process by the application's own code) keeps
    its full meaning: ``"openai/gpt-4.1"`` makes that model. A ``ModelName``
    equals the plain string of the same text, so a command survives a JSON
    round trip unchanged. ``field`` names where it came from
    (``"Chat.chat_model"``), for error messages; it may be given as a function
    making that text, called once when the text is first asked for.
    """

    __slots__ = ("_field",)
    _field: str | Callable[[], str]

    def __new__(cls, name: str, field: str | Callable[[], str] = "") -> ModelName:
        self = super().__new__(cls, name)
        self._field = field
        return self

    @property
    def field(self) -> str:
        """Where the name came from (``"Chat.chat_model"``), for error messages."""
        # Made when asked: the names of a Call's arguments come from anywhere in
        # them, and each holding its own path was quadratic in a long key's length.
        field = self._field
        if not isinstance(field, str):
            field = self._field = field()
        return field

    @field.setter
    def field(self, value: str) -> None:
        self._field = value


ToolSelection = bool | tuple[str, ...]
"""``True``: every registered tool; ``False``: none; a tuple: those tool names."""
HandleValidation = Literal["raise", "return_value", "return_none"]


def _kw(default: Any = None, **kwargs: Any) -> Any:
    """A keyword-only field; everything but the leading instruction is keyword-only."""
    return attrs.field(default=default, kw_only=True, **kwargs)


def _kw_factory(factory: Any) -> Any:
    return attrs.field(factory=factory, kw_only=True)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _tool_selection(value: Any) -> ToolSelection:
    if isinstance(value, bool):
        return value
    return tuple(value)


@attrs.frozen
class Command:
    """Base of everything a mailbox carries."""

    lane: ClassVar[Literal["work", "priority"]]


def _check_budget(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Budget):
        raise TypeError(f"budget must be a pride.Budget or None, got {type(value).__name__}")


@attrs.frozen
class WorkCommand(Command):
    """A command served in mailbox order, normally as one turn.

    ``model_turn`` is False only for [`Act`][pride.Act], which runs in order but has
    no turn context and no RunStart/RunEnd of its own.

    ``budget`` bounds the work of this command's turn (see
    [`Budget`][pride.Budget]); given, it replaces the branch's budget for that
    turn, and a session's budget still applies beside it.
    """

    lane: ClassVar[Literal["work", "priority"]] = "work"
    model_turn: ClassVar[bool] = True

    budget: Budget | None = attrs.field(default=None, kw_only=True, validator=_check_budget)


@attrs.frozen
class PriorityCommand(Command):
    """A supervisor-to-actor system message, taken before the next work item."""

    lane: ClassVar[Literal["work", "priority"]] = "priority"


# --------------------------------------------------------------------- work lane


@attrs.frozen
class _Prompt(WorkCommand):
    """The fields every model-calling verb shares.

    A WorkCommand itself, so that its fields and ``budget`` share one slotted
    layout (two slotted bases with fields cannot be combined).
    """

    instruction: str = ""
    guidance: str | None = _kw()
    context: JsonValue = _kw()
    plain_content: str | None = _kw()
    images: tuple[str, ...] = _kw((), converter=_strings)
    image_detail: Literal["auto", "low", "high"] = _kw("auto")
    sender: str | None = _kw()
    recipient: str | None = _kw()
    response_format: ResponseFormatSpec = _kw()
    chat_model: ModelSpec = _kw()
    request_options: Mapping[str, JsonValue] = _kw_factory(dict)


@attrs.frozen
class Chat(_Prompt, WorkCommand):
    """One model call over the history; records nothing.

    Returns the reply text, or the ``(Instruction, AssistantResponse)`` pair
    when ``return_ins_res_message`` is set. ``tools`` offers tool schemas to
    the model without executing anything.
    """

    tools: ToolSelection = _kw(False, converter=_tool_selection)
    return_ins_res_message: bool = _kw(False)


@attrs.frozen
class ChatAndRecord(_Prompt, WorkCommand):
    """Chat, then record the instruction and the response. Returns the text."""


@attrs.frozen
class Communicate(_Prompt, WorkCommand):
    """Chat, record both messages, then optionally parse into ``response_format``.

    ``num_parse_retries`` (capped at 5) bounds the reformat calls to the parse
    model; ``skip_validation`` returns the raw text. ``handle_validation``
    says what a reply that does not parse becomes, as for ``Operate``.
    """

    parse_model: ModelSpec = _kw()
    skip_validation: bool = _kw(False)
    num_parse_retries: int = _kw(3)
    clear_messages: bool = _kw(False)
    handle_validation: HandleValidation = _kw("return_value")


@attrs.frozen
class Operate(_Prompt, WorkCommand):
    """A structured turn: response format, optional reason and tool actions.

    With ``actions=True`` the model may request tool calls (natively where the
    endpoint supports it); with ``invoke_actions`` they are executed inside the
    turn, ``action_strategy`` deciding concurrent or sequential execution, and
    the model is asked again with the results, for at most ``max_rounds``
    rounds of calls. Returns an ``OperateResult`` when ``reason`` or
    ``actions`` is on, else the parsed format (or the text without one).
    A reply that does not parse is, by ``handle_validation``, a
    [`ParseFailed`][pride.ParseFailed] (``"raise"``), an
    [`Unparsed`][pride.Unparsed] (``"return_value"``) or None, in
    ``OperateResult.output`` when there is one.
    """

    parse_model: ModelSpec = _kw()
    tools: ToolSelection = _kw(True, converter=_tool_selection)
    actions: bool = _kw(False)
    reason: bool = _kw(False)
    invoke_actions: bool = _kw(True)
    action_strategy: Literal["concurrent", "sequential"] = _kw("concurrent")
    max_concurrent: int | None = _kw()
    max_rounds: int = _kw(3)
    skip_validation: bool = _kw(False)
    handle_validation: HandleValidation = _kw("return_value")


@attrs.frozen
class Parse(WorkCommand):
    """Parse ``text`` into ``response_format``, asking the parse model to reformat
    at most ``max_retries`` times (capped at 5). Records nothing.

    Keys are matched fuzzily (Jaro-Winkler >= ``similarity_threshold``) unless
    ``fuzzy_match`` is off; ``handle_unmatched`` says what happens to keys that
    match nothing (``ignore``/``raise``/``remove``/``fill``/``force``), missing
    keys being filled from ``fill_mapping``, or ``fill_value`` when required.
    Text that never parses is, by ``handle_validation``, a
    [`ParseFailed`][pride.ParseFailed] (``"raise"``), an
    [`Unparsed`][pride.Unparsed] (``"return_value"``) or None.
    """

    text: str
    response_format: ResponseFormatSpec = _kw()
    handle_validation: HandleValidation = _kw("return_value")
    max_retries: int = _kw(3)
    fuzzy_match: bool = _kw(True)
    similarity_threshold: float = _kw(0.85)
    handle_unmatched: Literal["ignore", "raise", "remove", "fill", "force"] = _kw("force")
    fill_value: JsonValue = _kw()
    fill_mapping: Mapping[str, JsonValue] = _kw_factory(dict)
    parse_model: ModelSpec = _kw()


@attrs.frozen
class Interpret(WorkCommand):
    """Rewrite raw user input into a clearer prompt. Records nothing."""

    text: str
    domain: str | None = _kw()
    style: str | None = _kw()
    interpret_model: ModelSpec = _kw()
    request_options: Mapping[str, JsonValue] = _kw_factory(dict)


@attrs.frozen
class Act(WorkCommand):
    """Execute tool calls directly and record each request/response pair.

    Served in mailbox order, but not a model turn: no turn context of its own
    and no RunStart/RunEnd. Inside a turn it runs in that turn's scope.
    """

    model_turn: ClassVar[bool] = False

    action_requests: tuple[ActionCall, ...] = attrs.field(converter=act_calls)
    strategy: Literal["concurrent", "sequential"] = _kw("concurrent")
    max_concurrent: int | None = _kw()
    suppress_errors: bool = _kw(True)


@attrs.frozen
class _Reasoning(_Prompt):
    """The fields ReAct and ReActStream share."""

    parse_model: ModelSpec = _kw()
    tools: ToolSelection = _kw(True, converter=_tool_selection)
    max_extensions: int = _kw(3)
    extension_allowed: bool = _kw(True)
    interpret: bool = _kw(False)
    interpret_domain: str | None = _kw()
    interpret_style: str | None = _kw()
    action_strategy: Literal["concurrent", "sequential"] = _kw("concurrent")
    reasoning_effort: Literal["low", "medium", "high"] | None = _kw()


@attrs.frozen
class ReAct(_Reasoning, WorkCommand):
    """Think, act, observe for up to ``max_extensions`` extra rounds, then answer.

    Honours loop control (BREAK, CANCEL) between rounds.
    """

    return_analysis: bool = _kw(False)


@attrs.frozen
class ReActStream(_Reasoning, WorkCommand):
    """ReAct, yielding each round's analysis and then the final answer."""


@attrs.frozen
class Run(_Prompt, WorkCommand):
    """Stream the turn's messages as they are produced.

    The model is called with the branch's tools; tool calls are executed and
    fed back until the model answers with text or ``max_rounds`` is reached.
    Items: the Instruction, text chunks (``str``), AssistantResponse,
    ActionRequest and ActionResponse messages. Loop control is checked after
    each item.
    """

    tools: ToolSelection = _kw(True, converter=_tool_selection)
    max_rounds: int = _kw(10)


@attrs.frozen(init=False)
class Call(WorkCommand):
    """Run the operation registered under ``operation`` as a turn.

    ``Call("summarise", style="short")`` calls ``await op(branch, style="short")``
    where ``op`` is found with ``branch.get_operation`` (attribute first).
    ``budget`` is the Call's own (it bounds the turn), never an argument of
    the operation.
    """

    operation: str
    kwargs: Mapping[str, JsonValue] = attrs.field(factory=dict)

    def __init__(self, operation: str, /, *, budget: Budget | None = None, **kwargs: Any) -> None:
        self.__attrs_init__(operation, kwargs, budget=budget)


# ------------------------------------------------------------------- approvals


@attrs.frozen
class PendingCall:
    """A tool call a suspended turn waits on: it runs only once a person approves it.

    Attributes:
        call_id: the id decisions name it by (the provider's tool-call id, or
            the id pride gave the call).
        function: the tool's name.
        arguments: the arguments the model gave.
    """

    call_id: str
    function: str
    arguments: Mapping[str, JsonValue] = attrs.field(factory=dict)


@attrs.frozen
class Decision:
    """A person's decision on a pending tool call: [`Approve`][pride.Approve] or
    [`Deny`][pride.Deny]."""


@attrs.frozen
class Approve(Decision):
    """Run the pending call."""


@attrs.frozen
class Deny(Decision):
    """Do not run the pending call; the model sees an error saying ``reason``."""

    reason: str = "denied"


def _decisions(value: Any) -> Mapping[str, Decision]:
    return dict(value)


@attrs.frozen
class Resume(WorkCommand):
    """Continue a turn that stopped: one suspended for approval, or one a crash interrupted.

    The turn's own command runs again, its completed steps answered from the
    turn journal (no model call repeated, no tool run twice), then goes on
    live; it keeps its turn id. ``decisions`` maps the call ids of the turn's
    pending calls to [`Approve`][pride.Approve] or [`Deny`][pride.Deny]; calls
    left undecided keep waiting (the turn suspends again once it reaches
    them). With ``abandon`` (a reason) the turn is not continued: it ends
    with [`TurnAbandoned`][pride.TurnAbandoned] and the conversation stays
    as it was before the turn. See docs/durability.md.

    Usually sent by [`Session.resolve`][pride.supervisors.session.Session.resolve], and by a
    session restoring a branch whose turn a crash interrupted.
    """

    turn_id: UUID
    decisions: Mapping[str, Decision] = attrs.field(factory=dict, converter=_decisions)
    abandon: str | None = _kw()


# ----------------------------------------------------------------- priority lane


@attrs.frozen(kw_only=True)
class Attach(PriorityCommand):
    """Wire a supervisor's shared references into the branch (between turns).

    ``memory`` is a default: the branch adopts it only if it has not claimed a
    store of its own (the first-claim rule). ``directory`` resolves
    branch names for sends made from the branch's turns.
    """

    owner_id: UUID | None = None
    owner_name: str | None = None
    observer: LiveRef = None
    hooks: LiveRef = None
    operations: LiveRef = None
    memory: LiveRef = None
    directory: LiveRef = None
    account: LiveRef = None


@attrs.frozen(kw_only=True)
class Detach(PriorityCommand):
    """Undo an Attach: clear owner, observer, hooks and usage account; fresh operation
    registry."""


@attrs.frozen(kw_only=True)
class Stop(PriorityCommand):
    """Stop the actor after the current turn; queued envelopes get BranchClosed."""

    reason: Literal["normal", "shutdown"] = "normal"
