"""Branch: one conversation, as an aggregate and as an actor.

The Branch object owns one conversation's state: its messages, tools,
models, logs and named operations, plus identity. Its verbs (``chat``,
``operate``, ``ReAct``, ...) are thin adapters: each builds its work command
and asks the branch's actor, which runs the algorithm from
`pride.operations` as one turn.

Run a standalone branch with ``async with Branch(...) as branch:`` (a
private supervisor), or hand it to a session with ``session.spawn(branch)``.

This module is long and one idea: the Branch, one class written in one
place, every method in its body with its real signature (the verbs repeat
their commands' parameters, which tests/actors/test_facade.py keeps equal),
delegating inward to helpers that take plain arguments.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self
from uuid import UUID

import trio

from ..actors import loop, turn, waits, wiring
from ..actors.actor import Actor, HookSink, SignalSink, StopReason
from ..actors.logs import DataLogger, LogConfig
from ..actors.mailbox import MailboxStatistics
from ..actors.nursery import PrivateNursery
from ..actors.reply import Reply
from ..actors.send import StreamItems, ask, stream
from ..actors.target import live_target
from ..actors.turn import LoopControl, LoopDirective
from ..context import CapabilityGrant, ContextProviderRegistry
from ..context.capabilities import apply_block
from ..llm import iModel
from ..memory import InMemoryStore, MemoryStore, is_memory_store
from ..messages import (
    ActionResponse,
    Budget,
    RoledMessage,
    Signal,
    System,
    Usage,
    commands as cmd,
)
from ..messages.coerce import PRIDE_SYSTEM_MESSAGE, action_calls, system_message
from ..messages.commands import (
    Decision,
    HandleValidation,
    JsonValue,
    ModelSpec,
    ResponseFormatSpec,
    ToolSelection,
)
from ..messages.history import History
from ..operations.registry import OperationManager
from ..tools import ActionManager, Tool
from . import (
    connect as connecting,
    control as controls,
    projection,
    recording,
    standalone,
)

if TYPE_CHECKING:
    from ..actors.target import Target

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "PRIDE_SYSTEM_MESSAGE",
    "Branch",
    "HookSink",
    "SignalSink",
    "live_branch",
]

DEFAULT_MAILBOX_SIZE = 64
"""Work envelopes a branch's mailbox holds before ``send`` waits."""


def live_branch(branch_id: UUID) -> Branch | None:
    """The branch with this id whose actor is running in this process, if any."""
    found: Branch | None = live_target(branch_id)
    return found


class Branch:
    """One conversation: its state, its facade verbs, and (while running) its actor.

    Args:
        user: who the conversation is with (an id or name).
        name: a stable, human name (sessions resolve names; stores key on it);
            by default ``branch-`` and the first 12 hex digits of its id.
        messages: an initial history.
        system: the system prompt (str or [`System`][pride.System]). A system
            message exists only when ``system``, ``system_datetime`` or
            ``use_lion_system_message`` is truthy.
        system_sender: sender recorded on the system message.
        chat_model: ``"provider/model"``, a config dict, or an iModel; default
            from ``PRIDE_CHAT_MODEL`` (``openai/gpt-4.1-mini``).
        parse_model: same forms; default: the chat model object itself.
        tools: callables or Tools to register.
        log_config: a LogConfig or a dict of its fields.
        system_datetime: True for the current UTC time, or a timestamp string.
        system_template: accepted for compatibility; a non-None value warns
            ``DeprecationWarning`` and has no effect.
        system_template_context: the same.
        logs: log entries to start from.
        use_lion_system_message: prepend pride's built-in preamble.
        memory: an explicit memory store, kept by identity.
        mailbox_size: work envelopes the mailbox holds before ``send`` waits.
        observer: a signal sink for standalone observation (sessions attach theirs).
        budget: a [`Budget`][pride.Budget] for each of its turns (a fresh
            allowance every turn; a command's own ``budget`` replaces it).
    """

    # Slots, not a __dict__: an idle branch should cost little (100,000 of
    # them is a benchmark target). Subclasses get a __dict__ unless they
    # declare slots too.
    __slots__ = (
        "__weakref__",
        "_chat_model",
        "_memory",
        "_message_listeners",
        "_name",
        "_operations",
        "_parse_model",
        "_private",
        "_providers",
        "_rewrite_listeners",
        "actor",
        "acts",
        "budget",
        "capabilities",
        "created_at",
        "id",
        "id_str",
        "logs",
        "mailbox_size",
        "messages",
        "metadata",
        "stable_name",
        "user",
    )

    def __init__(
        self,
        *,
        user: str | None = None,
        name: str | None = None,
        messages: Iterable[RoledMessage] | None = None,
        system: System | str | None = None,
        system_sender: str | None = None,
        chat_model: iModel | dict[str, Any] | str | None = None,
        parse_model: iModel | dict[str, Any] | str | None = None,
        tools: Any = None,
        log_config: LogConfig | Mapping[str, Any] | None = None,
        system_datetime: bool | str | None = None,
        system_template: Any = None,
        system_template_context: Mapping[str, Any] | None = None,
        logs: Iterable[Any] | None = None,
        use_lion_system_message: bool = False,
        memory: MemoryStore | None = None,
        mailbox_size: int = DEFAULT_MAILBOX_SIZE,
        observer: SignalSink | None = None,
        id: UUID | None = None,
        created_at: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
    ) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {mailbox_size}")
        if system_template is not None or system_template_context is not None:
            import warnings

            warnings.warn(
                "system_template and system_template_context are accepted for compatibility "
                "and have no effect",
                DeprecationWarning,
                stacklevel=2,
            )
        self.id: UUID = id if id is not None else uuid.uuid4()
        self.id_str = str(self.id)
        self._name: str = name if name is not None else f"branch-{self.id.hex[:12]}"
        self.stable_name = name is not None  # a store restores only branches named by code
        self.user = user
        self.created_at: float = created_at if created_at is not None else time.time()
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.mailbox_size = mailbox_size
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pride.Budget or None, got {type(budget).__name__}")
        self.budget: Budget | None = budget
        """The allowance each of the branch's turns gets (None: no limit); settable,
        for turns that start after the change."""

        # The five managers.
        self.messages: History = History(messages or ())
        """The recorded conversation, in order (``len()``, iteration, indexing)."""
        self.acts: ActionManager = ActionManager()
        """The tool registry (the action manager)."""
        self._chat_model = iModel.from_spec(chat_model)
        self._parse_model = (
            self._chat_model if parse_model is None else iModel.from_spec(parse_model)
        )
        self.logs: DataLogger = DataLogger(LogConfig.coerce(log_config), logs)
        """Model and tool call records (bounded by the log config's capacity)."""
        self._operations = OperationManager()

        if tools is not None:
            self.acts.register(tools)
        system = system_message(system, system_datetime, use_lion_system_message, system_sender)
        if system is not None:
            self.messages.set_system(system)

        # Branch-scoped live extensions (created lazily).
        if memory is not None and not is_memory_store(memory):
            raise TypeError(
                f"memory must be a MemoryStore (store/retrieve/search), got {type(memory).__name__}"
            )
        self._memory: MemoryStore | None = memory
        self._providers: ContextProviderRegistry | None = None
        self.capabilities: CapabilityGrant | None = None
        """The current capability grant, if any (see `grant_capabilities`)."""
        self._message_listeners: tuple[Callable[[Branch, RoledMessage], None], ...] = ()
        self._rewrite_listeners: list[Callable[[Branch], None]] | None = None

        # The runtime (never serialised): mailbox, turns, session attachments.
        self.actor: Actor = Actor(self.name, observer)
        """The branch's actor: its mailbox, its turns and its session wiring (for supervisors)."""
        self._private: PrivateNursery | None = None  # while standalone (`async with`)

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<Branch {self.name!r} {state}, {len(self.messages)} messages>"

    @property
    def name(self) -> str:
        """The branch's human name: sessions resolve it, stores key on it.

        Settable. A member's session re-indexes it under the new name, and
        refuses (``ValueError``) a name another of its members has, and any
        new name for a member it keeps in its store (which keys the
        conversation on the name: remove it from the session first).
        """
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        wiring.rename(self, value)  # the session's index first: it may refuse
        self._name = value

    # ------------------------------------------------------------ managers

    @property
    def msgs(self) -> History:
        """Alias of `messages` (the reference system's name)."""
        return self.messages

    @property
    def system(self) -> System | None:
        """The conversation's system message, if any."""
        return self.messages.system

    @property
    def tools(self) -> Mapping[str, Any]:
        """Registered tools by name."""
        return self.acts.tools

    def register_tools(self, tools: Any, *, update: bool = False) -> None:
        """Register tools the model may call.

        Args:
            tools: a [`Tool`][pride.tools.Tool], a callable (made a ``Tool``
                from its signature and docstring), or an iterable of them.
            update: replace a registered tool of the same name instead of failing.

        Raises:
            ValueError: a name is already registered (unless ``update``), or a
                callable's name cannot be a tool name; nothing was registered.
            TypeError: an item is neither a Tool nor a callable.
        """
        self.acts.register(tools, update=update)

    def register_mcp(
        self,
        server: Any,
        *,
        prefix: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
    ) -> tuple[str, ...]:
        """Register an MCP server's tools as this branch's tools.

        Each tool keeps the server's name and JSON schema, with ``prefix``
        prepended when given. The registration follows the server: tools it
        adds, changes or drops (a ``tools/list_changed`` notification, a
        restart) are updated here. See docs/mcp.md.

        Args:
            server: the handle [`Session.spawn_mcp`][pride.supervisors.session.Session.spawn_mcp]
                returned.
            prefix: prepended to each tool's name here.
            include: register only these tools (by their server names).
            exclude: leave these tools out (by their server names).

        Returns:
            The names the tools were registered under.

        Raises:
            TypeError: ``server`` is not an MCP server handle.
            ValueError: a name is already registered, or ``include`` names a
                tool the server does not have.
        """
        return connecting.register_mcp(
            self.acts, self.name, server, prefix=prefix, include=include, exclude=exclude
        )

    @property
    def chat_model(self) -> iModel:
        """The model turns use unless a command overrides it.

        Settable (a spec or an iModel); a change applies to turns that start
        after it, never to a running turn.
        """
        return self._chat_model

    @chat_model.setter
    def chat_model(self, value: iModel | dict[str, Any] | str) -> None:
        self._chat_model = iModel.from_spec(value)

    @property
    def parse_model(self) -> iModel:
        """The model used to reformat unparseable replies (default: the chat model)."""
        return self._parse_model

    @parse_model.setter
    def parse_model(self, value: iModel | dict[str, Any] | str) -> None:
        self._parse_model = iModel.from_spec(value)

    def dump_logs(self, path: str | Path | None = None, *, clear: bool = True) -> Path:
        """Append the call log to a file, one JSON record a line.

        Args:
            path: the file; default ``<persist_dir>/pride-logs-<time>.jsonl``
                from the log config.
            clear: empty the log once written.

        Returns:
            The file written.

        Raises:
            ValueError: no ``path``, and the log config has no ``persist_dir``.
            OSError: the file could not be written.
        """
        return self.logs.dump(path, clear=clear)

    @property
    def operations(self) -> OperationManager:
        """The branch's own named-operation registry.

        While the branch is attached, the session's registry stands behind it
        (``operations.shared``): lookups find the branch's names first.
        """
        return self._operations

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` under ``name``.

        `call` (or the [`Call`][pride.Call] command) runs it as a turn.

        Args:
            name: what `call` names it by; it may not be a Branch attribute
                (lookup is attribute-first, so it could never be reached).
            operation: the async function.
            update: replace an operation of the same name instead of failing.

        Raises:
            ValueError: ``name`` is taken (unless ``update``) or shadows an attribute.
            TypeError: ``operation`` is not an async function.
        """
        if isinstance(name, str) and (
            hasattr(type(self), name) or name in getattr(self, "__dict__", ())
        ):
            raise ValueError(
                f"operation name {name!r} is a Branch attribute; lookup is attribute-first "
                "(get_operation, Call), so the operation could never be reached: pick another name"
            )
        self._operations.register(name, operation, update=update)

    def get_operation(self, name: str) -> Callable[..., Any] | None:
        """The operation called ``name``: a Branch attribute first, then the
        branch's own registry, then the session's (while attached).

        Args:
            name: the operation's name.

        Returns:
            The callable, or None when nothing has that name.
        """
        if hasattr(self, name):
            found: Callable[..., Any] = getattr(self, name)
            return found
        return self._operations.get(name)

    # ------------------------------------------------- branch-scoped extensions

    @property
    def memory(self) -> MemoryStore:
        """The branch's memory store; no setter.

        The store given to the constructor (kept by identity), else a session's
        default adopted on attachment, else a private `InMemoryStore`
        created on first access. Reading it claims it: a session attached
        later does not replace it. Never serialised, never cloned.
        """
        if self._memory is None:
            self._memory = InMemoryStore()
        return self._memory

    def offer_memory(self, store: MemoryStore) -> None:
        """Adopt ``store`` as the memory unless the branch has one already (a
        session's default, applied on attachment: the first claim is kept).

        Args:
            store: the memory store offered.
        """
        if self._memory is None:
            self._memory = store

    @property
    def providers(self) -> ContextProviderRegistry:
        """The context-provider registry, created on first access (falsy while empty)."""
        if self._providers is None:
            self._providers = ContextProviderRegistry()
        return self._providers

    @property
    def has_providers(self) -> bool:
        """True when a context provider is registered (reading it creates no registry)."""
        return bool(self._providers)

    def grant_capabilities(self, operable: type, *, prompt: bool = True) -> CapabilityGrant:
        """Grant the structured outputs that ``operable``'s fields describe.

        From now on every recorded assistant message is read for fenced JSON
        blocks using the granted keys, which become signals:
        ``StructuredOutput`` (valid), ``EmissionRejected`` (invalid) or
        ``CapabilityViolation`` (mixed with other keys). Observation only:
        nothing is executed. A new grant replaces the previous one.

        Args:
            operable: an attrs class, a dataclass or a pydantic model class;
                its field names are the granted keys.
            prompt: also describe the grant in the system prompt, between
                ``CAP_BEGIN``/``CAP_END`` markers that replace a previous
                block (a system message is created if there is none). False
                installs only the grant.

        Returns:
            The installed grant (also `capabilities`).

        Raises:
            TypeError: ``operable`` is not one of those classes.
        """
        grant = CapabilityGrant.from_operable(operable)
        self.capabilities = grant
        if prompt:
            self.messages.set_system(apply_block(self.system, grant.render_prompt()))
        return grant

    def revoke_capabilities(self) -> None:
        """Clear the grant, and remove its block from the system prompt."""
        self.capabilities = None
        self.messages.set_system(apply_block(self.system, None))

    def connect(
        self,
        provider: str | None = None,
        base_url: str | None = None,
        endpoint: str = "chat",
        api_key: str | None = None,
        *,
        queue_capacity: int = connecting.DEFAULT_QUEUE_CAPACITY,
        capacity_refresh_time: float = connecting.DEFAULT_CAPACITY_REFRESH_TIME,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        imodel: iModel | None = None,
        name: str | None = None,
        description: str | None = None,
        request_options: Mapping[str, Any] | None = None,
        update: bool = False,
        **kwargs: Any,
    ) -> Tool:
        """Offer another model to this branch's model, as a tool.

        The tool takes one argument, ``instruction`` (text), sends it to the
        connected model as a single user message and returns the reply text.
        The call runs inside the turn that asked for it, through the connected
        model's own rate limits and retries; a failure becomes an error
        response, like any tool's. Give ``imodel=``, or the model's
        configuration (``model="provider/name"``, limits, options), which is
        passed to [`iModel`][pride.iModel].

        Args:
            provider: the connected model's provider (with ``model="provider/name"``
                among ``kwargs``).
            base_url: where the provider is (OpenAI-compatible servers).
            endpoint: only ``"chat"`` is supported.
            api_key: the key, when it is not in the provider's environment variable.
            queue_capacity: calls queued before callers wait (default 100).
            capacity_refresh_time: the rate-limit window in seconds (default 60).
            limit_requests: the connected model's request limit per window.
            limit_tokens: the connected model's token limit per window.
            imodel: an existing model to connect, instead of a configuration.
            name: the tool's name; default ``<provider>_<model>`` (characters
                a tool name cannot hold replaced by ``_``).
            description: what the calling model is told the tool does.
            request_options: options sent with every request (``temperature``, ...).
            update: replace a registered tool of the same name instead of failing.
            **kwargs: further [`iModel`][pride.iModel] arguments (``model``,
                ``timeout``, ``retry``, ...).

        Returns:
            The registered [`Tool`][pride.tools.Tool]; its ``function`` is a
            [`ConnectedModel`][pride.branch.connect.ConnectedModel] whose
            ``imodel`` is the connected model.

        Raises:
            ValueError: another endpoint, ``imodel`` together with a
                configuration, a bad configuration, or a taken name (unless
                ``update``).
            TypeError: ``imodel`` is not an iModel.
        """
        tool = connecting.connected_tool(
            provider,
            base_url,
            endpoint,
            api_key,
            queue_capacity=queue_capacity,
            capacity_refresh_time=capacity_refresh_time,
            limit_requests=limit_requests,
            limit_tokens=limit_tokens,
            imodel=imodel,
            name=name,
            description=description,
            request_options=request_options,
            **kwargs,
        )
        self.acts.register(tool, update=update)
        return tool

    # ------------------------------------------------ projection and cloning

    def to_dict(
        self,
        mode: projection.Mode = "python",
        db_meta_key: str | None = None,
        *,
        include_request_options: bool = False,
        include_logs: bool = True,
        include_log_config: bool = False,
        include_processor_config: bool = False,
    ) -> dict[str, Any]:
        """The branch's conversation and identity as plain data, for `from_dict`.

        A deliberate subset of the branch, not a checkpoint of the process:
        the identity (``id``, ``created_at``, ``metadata``, ``user``,
        ``name``), then ``messages`` (always: every message as the codec's
        plain data, and their order), ``logs`` (when included and not empty),
        ``system`` (when there is one), ``log_config`` (when included),
        ``chat_model`` (always) and ``parse_model`` (when it is another
        model). Never an API key, and no live object: tools, operations,
        memory, context providers, the capability grant and session wiring
        are re-wired by code after a restore.

        Args:
            mode: ``"python"`` (plain data; ``id`` a UUID, ``metadata`` a deep
                copy), ``"json"`` (JSON-safe throughout) or ``"db"`` (JSON-safe,
                with the metadata under ``db_meta_key``, since ``metadata``
                is a reserved name in common ORMs).
            db_meta_key: the metadata's key in ``"db"`` mode (default
                ``"node_metadata"``, which `from_dict` reads by itself).
            include_request_options: export the models' request options
                (``temperature``, ...).
            include_logs: export the call log (left out when empty anyway).
            include_log_config: export the log configuration.
            include_processor_config: export the models' rate-limit and queue settings.

        Returns:
            A new dict; changing it changes nothing on the branch.

        Raises:
            ValueError: ``mode`` is not ``"python"``, ``"json"`` or ``"db"``.
            InvalidMessage: in ``"json"`` or ``"db"`` mode, the metadata (or a
                model's request options) holds something JSON cannot carry;
                the path says where.
        """
        return projection.to_dict(
            self,
            mode,
            db_meta_key,
            include_request_options=include_request_options,
            include_logs=include_logs,
            include_log_config=include_log_config,
            include_processor_config=include_processor_config,
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        chat_model: iModel | None = None,
        parse_model: iModel | None = None,
        db_meta_key: str | None = None,
    ) -> Self:
        """A standalone branch from `to_dict` output; ``data`` is left unchanged.

        ``chat_model``/``parse_model`` replace the serialised models (which
        never carry a key: give one here, or set it in the environment). A
        top-level ``system`` is used only when the messages hold none. Tools,
        providers, memory, capabilities and operations are re-wired by code.

        Args:
            data: what `to_dict` returned (in any mode), or the same shape read back.
            chat_model: the chat model to use instead of the serialised one.
            parse_model: the parse model to use instead of the serialised one.
            db_meta_key: where the metadata is, for ``"db"``-mode data written
                with another key than ``"node_metadata"``.

        Returns:
            A new branch, not started.

        Raises:
            InvalidMessage: naming every offending path.
        """
        return projection.from_dict(
            cls, data, chat_model=chat_model, parse_model=parse_model, db_meta_key=db_meta_key
        )

    def clone(self, sender: str | UUID | None = None) -> Branch:
        """A new branch with a copy of this conversation; not started.

        Messages get fresh ids, ``sender`` (default: this branch's id) as
        sender and the clone as recipient; tools, models and the budget carry
        over (a distinct parse model stays distinct); ``metadata["clone_from"]`` holds
        this branch's id, user, created_at and message ids. Logs, memory,
        providers, capabilities, operations and session wiring do not.
        Start it with ``async with`` or ``session.spawn``.

        Args:
            sender: the copied messages' sender (default: this branch's id).

        Returns:
            The clone, not started.

        Raises:
            TypeError: ``sender`` is not a str or UUID.
        """
        return projection.clone(self, sender, into=Branch)

    async def aclone(self, sender: str | UUID | None = None) -> Branch:
        """`clone`, after a checkpoint.

        Messages are recorded synchronously by the actor, so the copy is
        taken between two recordings, never in the middle of one.

        Args:
            sender: the copied messages' sender (default: this branch's id).

        Returns:
            The clone, not started.
        """
        await trio.lowlevel.checkpoint()
        return projection.clone(self, sender, into=Branch)

    # ------------------------------------------------------------ messages

    def add_message(self, message: RoledMessage) -> RoledMessage:
        """Record ``message``, then tell the listeners, the observer and the hooks.

        The one door into the history from the runtime: the message is
        appended (a system message replaces the current one), then each
        message listener is called, then the attached observer gets a
        ``MessageAdded`` signal and the ``message_added`` hook fires. A
        failing listener is logged and the others still run: a listener never
        fails the turn that recorded the message.

        Args:
            message: the message to record.

        Returns:
            ``message``.
        """
        self.messages.append(message)
        if self._message_listeners:
            recording.notify(self, self._message_listeners, "message", message)
        actor = self.actor
        if actor.observer is not None or actor.hooks is not None:
            wiring.message_recorded(self, message)
        return message

    def add_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Call ``listener(branch, message)`` synchronously for every recorded message.

        A store writes each message as it is recorded this way, or a UI shows it.

        Args:
            listener: called with the branch and the message; what it raises
                is logged, never raised into the turn.
        """
        # Replaced, never mutated: a listener that adds or removes one mid-call
        # cannot disturb the round in progress, and no round copies the list.
        self._message_listeners = (*self._message_listeners, listener)

    def remove_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Stop calling ``listener``.

        Args:
            listener: a listener added before.

        Raises:
            ValueError: ``listener`` is not a message listener of the branch.
        """
        listeners = list(self._message_listeners)
        listeners.remove(listener)
        self._message_listeners = tuple(listeners)

    def add_rewrite_listener(self, listener: Callable[[Branch], None]) -> None:
        """Call ``listener(branch)`` synchronously after the history changes other
        than by a recorded message.

        That is: cleared (``communicate(clear_messages=True)``,
        ``branch.messages.clear()``), or its system message replaced or removed
        (``branch.messages.set_system``). The listener reads `messages` anew.

        Args:
            listener: called with the branch; what it raises is logged.
        """
        if self._rewrite_listeners is None:
            self._rewrite_listeners = []
            self.messages.on_rewrite = self._history_rewritten
        self._rewrite_listeners.append(listener)

    def remove_rewrite_listener(self, listener: Callable[[Branch], None]) -> None:
        """Stop calling ``listener``.

        Args:
            listener: a listener added before.

        Raises:
            ValueError: ``listener`` is not a rewrite listener of the branch.
        """
        listeners = self._rewrite_listeners
        if listeners is None or listener not in listeners:
            raise ValueError(f"{listener!r} is not a rewrite listener of branch {self.name!r}")
        listeners.remove(listener)
        if not listeners:
            self._rewrite_listeners = None
            self.messages.on_rewrite = None

    def _history_rewritten(self) -> None:
        recording.notify(self, tuple(self._rewrite_listeners or ()), "history")

    # ------------------------------------------------------------ signals

    def emit(self, signal: Signal) -> None:
        """Deliver ``signal`` to the attached observer.

        Inside a live turn its async subscribers are drained before the
        turn's terminal signal; outside one they run as best-effort
        background work of the actor.

        Args:
            signal: the signal (a [`Signal`][pride.Signal]).
        """
        wiring.emit(self, signal)

    def fire_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Fire a non-blocking hook point; async handlers join the turn's signal drain.

        Args:
            point: the hook point's name (``"message_added"``, ...).
            payload: what the handlers are given.
        """
        wiring.fire_hook(self, point, payload)

    async def run_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Run a hook point and wait for its handlers (the blocking points).

        Args:
            point: the hook point's name (``"before_tool_call"``, ...).
            payload: what the handlers are given.

        Raises:
            Exception: what a handler raised (a blocking handler denies that way).
        """
        await wiring.run_hook(self, point, payload)

    @property
    def owner_id(self) -> UUID | None:
        """The id of the session this branch belongs to, if any."""
        return self.actor.owner_id

    # ------------------------------------------------------------- control

    def control(
        self, directive: Any, *, reason: str | None = None, turn_id: UUID | None = None
    ) -> bool:
        """Steer the branch's running turn: write a loop directive into it; never queues.

        The turn's loops (`operate`'s rounds, `ReAct`, the streaming verbs)
        read it at their next check: ``LoopDirective.BREAK`` fails the turn
        with ``LoopBreak``, ``LoopDirective.CANCEL`` ends it cleanly. Callable
        from anywhere in the process (an observer callback, a UI, another
        task); the last write before a check wins.

        Args:
            directive: a [`LoopDirective`][pride.LoopDirective].
            reason: why, carried with the directive.
            turn_id: write only if the running turn is this one.

        Returns:
            True if written; False, storing nothing, when no turn is running
            (or it is finishing) or ``turn_id`` names another turn.

        Raises:
            TypeError: ``directive`` is not a LoopDirective, or ``turn_id`` not a UUID.
        """
        if not isinstance(directive, LoopDirective):
            raise TypeError(f"directive must be a LoopDirective, got {type(directive).__name__}")
        context = controls.addressed_turn(self.actor, turn_id)
        if context is None:
            return False
        context.control = LoopControl(directive, reason)
        return True

    def poll_control(self, *, turn_id: UUID | None = None) -> LoopControl | None:
        """Take the running turn's pending directive, clearing it (for operations' loops).

        Args:
            turn_id: take it only if the running turn is this one.

        Returns:
            The pending [`LoopControl`][pride.LoopControl], or None.

        Raises:
            TypeError: ``turn_id`` is not a UUID.
        """
        context = controls.addressed_turn(self.actor, turn_id)
        if context is None:
            return None
        pending, context.control = context.control, None
        return pending

    @property
    def usage(self) -> Usage:
        """What the branch's turns (and ``Act`` items) have used so far, in this process.

        Counted as calls happen: a running turn's calls are in it already.
        """
        return self.actor.account.usage()

    @property
    def active_turn_id(self) -> UUID | None:
        """The id of the turn running now, if any."""
        state = self.actor.turn
        return state.context.turn_id if state is not None else None

    @property
    def last_context_report(self) -> Any:
        """The context-provider report of the last finished top-level turn.

        Published when that turn finalises (before its caller's ``ask``
        returns); None after a turn with no providers.
        """
        return self.actor.last_context_report

    # --------------------------------------------------------------- actor

    @property
    def running(self) -> bool:
        """True while the branch's mailbox accepts commands."""
        return self.actor.running

    def mailbox_statistics(self) -> MailboxStatistics | None:
        """A snapshot of the mailbox, or None if the actor never started."""
        return self.actor.statistics()

    async def deliver(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox (the [`Target`][pride.Target] protocol).

        Work waits while the mailbox is full; priority commands never wait.
        Returns without a checkpoint when there was room (the send API
        checkpoints around it).

        Args:
            envelope: the [`Reply`][pride.Reply] carrying the command.

        Raises:
            BranchNotRunning: the actor was never started.
            BranchClosed: the branch has stopped.

        Cancellation: cancelled while waiting for room, nothing was queued.
        """
        mailbox = self.actor.require_mailbox(self)
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
            return
        if not mailbox.offer(envelope):  # room (mostly): queued without a coroutine
            await mailbox.put(envelope, checkpoint=False)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox now (the [`Target`][pride.Target] protocol).

        Args:
            envelope: the [`Reply`][pride.Reply] carrying the command.

        Raises:
            MailboxFull: the work lane is full.
            BranchNotRunning, BranchClosed: as for `deliver`.
        """
        mailbox = self.actor.require_mailbox(self)
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
        else:
            mailbox.put_nowait(envelope)

    def line_up(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox now, or in line for room when it is full.

        For a caller that waits for the outcome through the envelope's done
        callback instead of a trio task (`pride.actors.send.send_in_line`,
        behind ``pride.aio``'s asks); see `pride.actors.mailbox.Mailbox.line_up`.

        Args:
            envelope: the [`Reply`][pride.Reply] carrying the command.

        Raises:
            BranchNotRunning, BranchClosed: as for `deliver`.
        """
        mailbox = self.actor.require_mailbox(self)
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
        else:
            mailbox.line_up(envelope)

    async def serve(
        self, host: trio.Nursery | None = None, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> StopReason:
        """Run this branch's actor in the calling task until it is stopped.

        For supervisors: ``await nursery.start(branch.serve)`` returns once the
        actor accepts commands. Pass a ``host`` nursery that outlives the actor
        (``nursery.start(branch.serve, nursery)``) to run the turns' nested
        work in it instead of a nursery of the actor's own (lighter for many
        idle branches).

        Args:
            host: a nursery that outlives the actor, for the turns' nested work.
            task_status: trio's, given by ``nursery.start``.

        Returns:
            Why the actor stopped. On ``Stop`` every envelope still queued
            was answered with ``BranchClosed``.

        Raises:
            Escalate: a crash (also any other exception escaping the actor
                loop), after the envelope being served was answered with it.

        Cancellation: a running turn is cancelled and ends with
        ``RunFailed``; the mailbox is left as it is for the supervisor.
        """
        return await loop.serve(self, host, task_status=task_status)

    async def __aenter__(self) -> Self:
        """Run the branch standalone: its actor in a nursery of its own (standalone.py)."""
        self._private = await standalone.start(self)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool:
        try:
            private, self._private = self._private, None
            return await standalone.stop(self, private, exc_info)
        finally:
            exc_info = ()  # an error leaving holds this frame: no cycle through it

    # ------------------------------------------- kept for the existing tests

    @property
    def _active_turn(self) -> turn.TurnExecutionContext | None:
        state = self.actor.turn
        return state.context if state is not None else None

    @property
    def _last_context_report(self) -> Any:
        return self.actor.last_context_report

    @_last_context_report.setter
    def _last_context_report(self, value: Any) -> None:
        self.actor.last_context_report = value

    @property
    def _waiting_on(self) -> dict[Any, int]:
        return waits.waiting_on(self)

    # --------------------------------------------------------------- verbs

    # Each verb builds its work command and asks the branch's actor for it:
    # ``await branch.chat("hi")`` is ``await pride.ask(branch, Chat("hi"))``.
    # A verb's parameters are its command's fields, plus ``timeout`` (seconds
    # to wait in all) on the verbs that wait; tests/actors/test_facade.py
    # checks that they stay the same as the command's. Inside the branch's own
    # active turn a verb runs nested in that turn, never through the mailbox.

    async def chat(
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        tools: ToolSelection = False,
        return_ins_res_message: bool = False,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask the model once, over the conversation so far; record nothing.

        The [`Chat`][pride.Chat] command as a verb: one turn of the branch
        (``RunStart`` ... ``RunEnd``), in mailbox order.

        Args:
            instruction: what to ask the model.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction.
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: a JSON schema dict or a class (attrs, dataclass,
                TypedDict, pydantic) the reply is asked to fit; the reply is
                returned as text all the same.
            chat_model: the model for this turn only (``"provider/model"``, a
                config dict or an iModel); the branch's `chat_model` is unchanged.
            request_options: provider options for this request (``temperature``, ...).
            tools: offer the model tool schemas without running any: True for
                every registered tool, or the names of some.
            return_ins_res_message: return the instruction and the response as messages.
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The reply text; with ``return_ins_res_message``, the
            ``(Instruction, AssistantResponse)`` pair (neither is recorded).

        Raises:
            BranchNotRunning: the branch's actor is not running (``async with
                branch`` or a session starts it).
            BranchClosed: the branch has stopped.
            ProviderError: the model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            TurnCancelled: the branch's supervisor restarted or stopped it mid-turn.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: if the caller is cancelled (or times out) while the
        command is queued, it is dropped and never runs; once it runs, the turn
        is cancelled and ends with ``RunFailed``.
        """
        return await ask(
            self,
            cmd.Chat(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                tools=tools,
                return_ins_res_message=return_ins_res_message,
                budget=budget,
            ),
            timeout,
        )

    async def chat_and_record(
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> str:
        """Ask the model once, then record the instruction and its reply.

        The [`ChatAndRecord`][pride.ChatAndRecord] command as a verb. Nothing
        is recorded when the model call fails.

        Args:
            instruction: what to ask the model.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction.
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: a JSON schema dict or a class the reply is asked to fit.
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for this request (``temperature``, ...).
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The reply text, as recorded.

        Raises:
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: the model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            TurnCancelled: the branch's supervisor restarted or stopped it mid-turn.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`; a turn cancelled before the reply records nothing.
        """
        result: str = await ask(
            self,
            cmd.ChatAndRecord(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                budget=budget,
            ),
            timeout,
        )
        return result

    async def communicate(
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        parse_model: ModelSpec = None,
        skip_validation: bool = False,
        num_parse_retries: int = 3,
        clear_messages: bool = False,
        handle_validation: HandleValidation = "return_value",
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask the model, record both messages, then parse the reply into ``response_format``.

        The [`Communicate`][pride.Communicate] command as a verb.

        Args:
            instruction: what to ask the model.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction.
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: a JSON schema dict or a class (attrs, dataclass,
                TypedDict, pydantic) to parse the reply into; None returns the text.
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for this request (``temperature``, ...).
            parse_model: the model asked to reformat a reply that does not
                parse (default: the branch's `parse_model`).
            skip_validation: return the reply text without parsing it.
            num_parse_retries: reformat calls at most (capped at 5).
            clear_messages: clear the conversation before asking.
            handle_validation: what a reply that never parses becomes:
                ``"raise"`` ([`ParseFailed`][pride.ParseFailed]),
                ``"return_value"`` (an [`Unparsed`][pride.Unparsed]) or
                ``"return_none"``.
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The parsed ``response_format``, or the reply text without one.

        Raises:
            ParseFailed: the reply did not parse and ``handle_validation="raise"``.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: the model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            TurnCancelled: the branch's supervisor restarted or stopped it mid-turn.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`.
        """
        return await ask(
            self,
            cmd.Communicate(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                parse_model=parse_model,
                skip_validation=skip_validation,
                num_parse_retries=num_parse_retries,
                clear_messages=clear_messages,
                handle_validation=handle_validation,
                budget=budget,
            ),
            timeout,
        )

    async def operate(
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        parse_model: ModelSpec = None,
        tools: ToolSelection = True,
        actions: bool = False,
        reason: bool = False,
        invoke_actions: bool = True,
        action_strategy: Literal["concurrent", "sequential"] = "concurrent",
        max_concurrent: int | None = None,
        max_rounds: int = 3,
        skip_validation: bool = False,
        handle_validation: HandleValidation = "return_value",
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """A structured turn: a response format, optionally a reason and tool calls.

        The [`Operate`][pride.Operate] command as a verb. With ``actions`` the
        model may call tools (natively where the endpoint can); with
        ``invoke_actions`` the calls run inside the turn and the model is asked
        again with their results, for at most ``max_rounds`` rounds. The
        instruction, the replies and every tool call and result are recorded.

        Args:
            instruction: what to ask the model.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction.
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: a JSON schema dict or a class (attrs, dataclass,
                TypedDict, pydantic) to parse the final reply into.
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for this request (``temperature``, ...).
            parse_model: the model asked to reformat a reply that does not
                parse (default: the branch's `parse_model`).
            tools: the tools offered with ``actions``: True for every
                registered tool, False for none, or the names of some.
            actions: let the model ask for tool calls.
            reason: ask the model for its reasoning too (a
                [`Reason`][pride.Reason] in the result).
            invoke_actions: run the calls the model asks for (else only return them).
            action_strategy: run a round's calls ``"concurrent"``-ly or one
                after another (``"sequential"``).
            max_concurrent: at most this many calls at once (None: no limit).
            max_rounds: rounds of tool calls at most; the call after the last
                round offers no tools, so the turn ends with an answer.
            skip_validation: return the reply text without parsing it.
            handle_validation: what a reply that never parses becomes:
                ``"raise"`` ([`ParseFailed`][pride.ParseFailed]),
                ``"return_value"`` (an [`Unparsed`][pride.Unparsed]) or
                ``"return_none"``.
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            With ``reason`` or ``actions``, an [`OperateResult`][pride.OperateResult]
            (its ``output`` the parsed format); otherwise the parsed format, or
            the reply text when there is no format.

        Raises:
            ParseFailed: the reply did not parse and ``handle_validation="raise"``.
            ApprovalRequired: a tool that needs approval was called; the turn
                waits for `Session.resolve` (see
                [`Resume`][pride.Resume]).
            LoopBreak: a BREAK directive (`control`) stopped the rounds.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: the model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            TurnCancelled: the branch's supervisor restarted or stopped it mid-turn.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`; a tool call cut short still gets a
        recorded response saying so.
        """
        return await ask(
            self,
            cmd.Operate(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                parse_model=parse_model,
                tools=tools,
                actions=actions,
                reason=reason,
                invoke_actions=invoke_actions,
                action_strategy=action_strategy,
                max_concurrent=max_concurrent,
                max_rounds=max_rounds,
                skip_validation=skip_validation,
                handle_validation=handle_validation,
                budget=budget,
            ),
            timeout,
        )

    async def parse(
        self,
        text: str,
        *,
        response_format: ResponseFormatSpec = None,
        handle_validation: HandleValidation = "return_value",
        max_retries: int = 3,
        fuzzy_match: bool = True,
        similarity_threshold: float = 0.85,
        handle_unmatched: Literal["ignore", "raise", "remove", "fill", "force"] = "force",
        fill_value: JsonValue = None,
        fill_mapping: Mapping[str, JsonValue] | None = None,
        parse_model: ModelSpec = None,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Parse ``text`` into ``response_format``, asking the parse model to reformat it
        when it does not fit. Records nothing.

        The [`Parse`][pride.Parse] command as a verb. The JSON in ``text`` is
        found and its keys matched to the format's; each failed attempt is
        followed by a reformat call naming the error, at most ``max_retries``
        times.

        Args:
            text: the text to parse (a model's reply, say).
            response_format: a JSON schema dict or a class (attrs, dataclass,
                TypedDict, pydantic) to parse into.
            handle_validation: what text that never parses becomes:
                ``"raise"`` ([`ParseFailed`][pride.ParseFailed]),
                ``"return_value"`` (an [`Unparsed`][pride.Unparsed]) or
                ``"return_none"``.
            max_retries: reformat calls at most (capped at 5).
            fuzzy_match: match keys by similarity, not only exactly.
            similarity_threshold: the Jaro-Winkler similarity a fuzzy match needs.
            handle_unmatched: what becomes of keys that match nothing:
                ``"ignore"``, ``"raise"``, ``"remove"``, ``"fill"`` or ``"force"``.
            fill_value: the value for a missing required key.
            fill_mapping: values for missing keys, by key.
            parse_model: the model asked to reformat (default: the branch's `parse_model`).
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The parsed value; when every attempt failed, an
            [`Unparsed`][pride.Unparsed] or None (by ``handle_validation``).

        Raises:
            ParseFailed: the text did not parse and ``handle_validation="raise"``.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: a reformat call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`.
        """
        return await ask(
            self,
            cmd.Parse(
                text,
                response_format=response_format,
                handle_validation=handle_validation,
                max_retries=max_retries,
                fuzzy_match=fuzzy_match,
                similarity_threshold=similarity_threshold,
                handle_unmatched=handle_unmatched,
                fill_value=fill_value,
                fill_mapping=fill_mapping or {},
                parse_model=parse_model,
                budget=budget,
            ),
            timeout,
        )

    async def interpret(
        self,
        text: str,
        *,
        domain: str | None = None,
        style: str | None = None,
        interpret_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> str:
        """Rewrite raw user input into a clearer, self-contained prompt. Records nothing.

        The [`Interpret`][pride.Interpret] command as a verb. The model sees
        the conversation so far, so "do that again" can be resolved.

        Args:
            text: the user's raw input.
            domain: the field the input belongs to (its vocabulary is used).
            style: the style the prompt is written in.
            interpret_model: the model for this call (default: the branch's `chat_model`).
            request_options: provider options (default temperature 0.1).
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The rewritten prompt.

        Raises:
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: the model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`.
        """
        result: str = await ask(
            self,
            cmd.Interpret(
                text,
                domain=domain,
                style=style,
                interpret_model=interpret_model,
                request_options=request_options or {},
                budget=budget,
            ),
            timeout,
        )
        return result

    async def act(
        self,
        action_request: Any,
        /,
        *,
        strategy: Literal["concurrent", "sequential"] = "concurrent",
        max_concurrent: int | None = None,
        suppress_errors: bool = True,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> list[ActionResponse]:
        """Run tool calls directly and record each request and its response.

        The [`Act`][pride.Act] command as a verb: served in mailbox order, but
        not a model turn (no ``RunStart``/``RunEnd``); inside a turn it runs
        in that turn.

        Args:
            action_request: one call or a list of calls, each an
                [`ActionCall`][pride.ActionCall], a ``{"function", "arguments"}``
                dict, or a tool-call object with ``name`` and ``arguments``.
            strategy: run the calls ``"concurrent"``-ly or one after another
                (``"sequential"``).
            max_concurrent: at most this many calls at once (None: no limit).
            suppress_errors: a failed call becomes a response carrying its
                error; False raises ``ToolError`` once every call was recorded.
            budget: limits for these calls, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The recorded [`ActionResponse`][pride.ActionResponse] of each call,
            in call order.

        Raises:
            TypeError: a call is malformed (nothing runs).
            ToolError: a call failed and ``suppress_errors`` is False.
            ApprovalRequired: a tool that needs approval was called.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            BudgetExceeded: the calls ran past the budget.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: a call cut short still gets a recorded response saying so.
        """
        result: list[ActionResponse] = await ask(
            self,
            cmd.Act(
                action_calls(action_request),
                strategy=strategy,
                max_concurrent=max_concurrent,
                suppress_errors=suppress_errors,
                budget=budget,
            ),
            timeout,
        )
        return result

    async def ReAct(  # the reference system's name
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        parse_model: ModelSpec = None,
        tools: ToolSelection = True,
        max_extensions: int = 3,
        extension_allowed: bool = True,
        interpret: bool = False,
        interpret_domain: str | None = None,
        interpret_style: str | None = None,
        action_strategy: Literal["concurrent", "sequential"] = "concurrent",
        reasoning_effort: Literal["low", "medium", "high"] | None = None,
        return_analysis: bool = False,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Think, act, observe, then answer, all in one turn.

        The [`ReAct`][pride.ReAct] command as a verb. Each round is an
        `operate` with a [`ReActAnalysis`][pride.ReActAnalysis] format and
        the tools offered and run; while the analysis asks for more and
        extensions remain, another round follows; then the final answer is
        asked for in ``response_format``. Every round is recorded.

        Args:
            instruction: the task.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction (first round only).
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: the final answer's format (default: an
                [`Analysis`][pride.Analysis], answered as its text).
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for these requests (``temperature``, ...).
            parse_model: the model asked to reformat a reply that does not parse.
            tools: the tools offered: True for every registered tool, False
                for none, or the names of some.
            max_extensions: rounds the model may add after the first (capped at 100).
            extension_allowed: let the model ask for more rounds at all.
            interpret: first rewrite the instruction into a clearer prompt (`interpret`).
            interpret_domain: ``domain`` for that rewrite.
            interpret_style: ``style`` for that rewrite.
            action_strategy: run a round's calls ``"concurrent"``-ly or one
                after another (``"sequential"``).
            reasoning_effort: sent to the provider as ``reasoning_effort`` and
                named in each round's guidance.
            return_analysis: return each round's result with the answer.
            budget: limits for this turn, instead of the branch's `budget`.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The answer (text with the default format, else the parsed format or
            an [`Unparsed`][pride.Unparsed]); with ``return_analysis``,
            ``(answer, rounds)``, each round an [`OperateResult`][pride.OperateResult].
            After a CANCEL directive, None (``(None, rounds so far)``).

        Raises:
            LoopBreak: a BREAK directive (`control`) stopped the rounds.
            ValueError: ``max_extensions`` is negative.
            ApprovalRequired: a tool that needs approval was called.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            ProviderError: a model call failed (after the model's retries).
            BudgetExceeded: the turn ran past its budget.
            TurnCancelled: the branch's supervisor restarted or stopped it mid-turn.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `operate`.
        """
        return await ask(
            self,
            cmd.ReAct(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                parse_model=parse_model,
                tools=tools,
                max_extensions=max_extensions,
                extension_allowed=extension_allowed,
                interpret=interpret,
                interpret_domain=interpret_domain,
                interpret_style=interpret_style,
                action_strategy=action_strategy,
                reasoning_effort=reasoning_effort,
                return_analysis=return_analysis,
                budget=budget,
            ),
            timeout,
        )

    def ReActStream(  # the reference system's name
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        parse_model: ModelSpec = None,
        tools: ToolSelection = True,
        max_extensions: int = 3,
        extension_allowed: bool = True,
        interpret: bool = False,
        interpret_domain: str | None = None,
        interpret_style: str | None = None,
        action_strategy: Literal["concurrent", "sequential"] = "concurrent",
        reasoning_effort: Literal["low", "medium", "high"] | None = None,
        budget: Budget | None = None,
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """`ReAct`, handing over each round as it completes, then the answer.

        The [`ReActStream`][pride.ReActStream] command as a verb:
        ``async with branch.ReActStream("task") as rounds: async for item in
        rounds: ...`` is ``pride.stream(branch, ReActStream("task"))``. Nothing
        is queued before the block is entered; the turn advances as the items
        are consumed and ends when the block is left.

        Args:
            instruction: the task.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction (first round only).
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: the final answer's format (default: an
                [`Analysis`][pride.Analysis]).
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for these requests (``temperature``, ...).
            parse_model: the model asked to reformat a reply that does not parse.
            tools: the tools offered: True for every registered tool, False
                for none, or the names of some.
            max_extensions: rounds the model may add after the first (capped at 100).
            extension_allowed: let the model ask for more rounds at all.
            interpret: first rewrite the instruction into a clearer prompt (`interpret`).
            interpret_domain: ``domain`` for that rewrite.
            interpret_style: ``style`` for that rewrite.
            action_strategy: run a round's calls ``"concurrent"``-ly or one
                after another (``"sequential"``).
            reasoning_effort: sent to the provider as ``reasoning_effort`` and
                named in each round's guidance.
            budget: limits for this turn, instead of the branch's `budget`.

        Returns:
            An async context manager yielding the items: each round's
            [`OperateResult`][pride.OperateResult], then the answer.

        Raises:
            Exception: the turn's error (as for `ReAct`), from the ``async
                for`` after the last item.

        Cancellation: leaving the block early (break, error, cancellation)
        ends the turn cleanly; the block's exit waits for its terminal signal.
        """
        return stream(
            self,
            cmd.ReActStream(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                parse_model=parse_model,
                tools=tools,
                max_extensions=max_extensions,
                extension_allowed=extension_allowed,
                interpret=interpret,
                interpret_domain=interpret_domain,
                interpret_style=interpret_style,
                action_strategy=action_strategy,
                reasoning_effort=reasoning_effort,
                budget=budget,
            ),
        )

    def run(
        self,
        instruction: str = "",
        *,
        guidance: str | None = None,
        context: JsonValue = None,
        plain_content: str | None = None,
        images: tuple[str, ...] = (),
        image_detail: Literal["auto", "low", "high"] = "auto",
        sender: str | None = None,
        recipient: str | None = None,
        response_format: ResponseFormatSpec = None,
        chat_model: ModelSpec = None,
        request_options: Mapping[str, JsonValue] | None = None,
        tools: ToolSelection = True,
        max_rounds: int = 10,
        budget: Budget | None = None,
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """Stream a turn's messages as they are made, the tool loop included.

        The [`Run`][pride.Run] command as a verb: ``async with
        branch.run("task") as items: async for item in items: ...`` is
        ``pride.stream(branch, Run("task"))``. The model is offered the tools
        natively; its calls run inside the turn and are fed back until it
        answers without tool calls, for at most ``max_rounds`` rounds.

        Args:
            instruction: what to ask the model.
            guidance: further direction, sent after the instruction.
            context: JSON data sent with the instruction.
            plain_content: text sent instead of the instruction, guidance and context.
            images: image URLs or data URIs sent with the instruction.
            image_detail: how closely the provider should look at the images.
            sender: the instruction's sender (default: the branch's user).
            recipient: the instruction's recipient (default: the branch).
            response_format: a JSON schema dict or a class the reply is asked to fit.
            chat_model: the model for this turn only; the branch's `chat_model`
                is unchanged.
            request_options: provider options for these requests (``temperature``, ...).
            tools: the tools offered: True for every registered tool, False
                for none, or the names of some.
            max_rounds: rounds of tool calls at most; the call after the last
                round offers no tools, so the turn ends with an answer.
            budget: limits for this turn, instead of the branch's `budget`.

        Returns:
            An async context manager yielding the items in order: the
            Instruction, the reply's text chunks (``str``) as the model streams,
            the AssistantResponse, then each round's ActionRequest and
            ActionResponse messages. All but the chunks are recorded.

        Raises:
            Exception: the turn's error (a `ProviderError`, `BudgetExceeded`,
                `LoopBreak`, ...), from the ``async for`` after the last item.

        Cancellation: leaving the block early ends the turn cleanly; what was
        recorded stays recorded, and a tool call cut short gets a response
        saying so.
        """
        return stream(
            self,
            cmd.Run(
                instruction,
                guidance=guidance,
                context=context,
                plain_content=plain_content,
                images=images,
                image_detail=image_detail,
                sender=sender,
                recipient=recipient,
                response_format=response_format,
                chat_model=chat_model,
                request_options=request_options or {},
                tools=tools,
                max_rounds=max_rounds,
                budget=budget,
            ),
        )

    async def call(
        self,
        operation: str,
        /,
        *,
        budget: Budget | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run the operation registered as ``operation`` as one turn of this branch.

        The [`Call`][pride.Call] command as a verb: ``await
        branch.call("summarise", style="short")`` runs ``await op(branch,
        style="short")``, ``op`` found by `get_operation` (a Branch attribute
        first, then the branch's registry, then its session's).

        Args:
            operation: the registered name.
            budget: limits for this turn, instead of the branch's `budget`
                (never passed to the operation).
            timeout: seconds to wait in all (None: no limit; never passed
                to the operation).
            **kwargs: the operation's keyword arguments.

        Returns:
            What the operation returned.

        Raises:
            UnknownOperation: nothing is registered under ``operation``.
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            trio.TooSlowError: ``timeout`` expired.
            Exception: whatever the operation raised.

        Cancellation: as for `chat`.
        """
        return await ask(self, cmd.Call(operation, budget=budget, **kwargs), timeout)

    async def resume(
        self,
        turn_id: UUID,
        decisions: Mapping[str, Decision] | None = None,
        *,
        abandon: str | None = None,
        budget: Budget | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Continue a turn of this branch that stopped for approval, or that a crash
        interrupted.

        The [`Resume`][pride.Resume] command as a verb. The turn's own command
        runs again, its finished steps answered from the turn journal (no
        model call repeated, no tool run twice), and goes on live with the
        same turn id. A session's `resolve` finds the branch for you.

        Args:
            turn_id: the stopped turn (``ApprovalRequired.turn_id``).
            decisions: [`Approve`][pride.Approve] or [`Deny`][pride.Deny] by
                pending call id; calls left out keep waiting.
            abandon: give the turn up instead, for this reason: it ends with
                [`TurnAbandoned`][pride.TurnAbandoned] and the conversation
                stays as it was before it.
            budget: limits for the continued turn.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The turn's result, as its first caller would have had it.

        Raises:
            UnknownTurn: the branch has no unfinished turn ``turn_id``.
            UnknownPendingCall: a decision names a call the turn does not wait on.
            ApprovalRequired: calls still wait (the turn stopped again).
            TurnAbandoned: the turn was given up (``abandon``).
            BranchNotRunning: the branch's actor is not running.
            BranchClosed: the branch has stopped.
            trio.TooSlowError: ``timeout`` expired.

        Cancellation: as for `chat`.
        """
        return await ask(
            self,
            cmd.Resume(turn_id, decisions or {}, abandon=abandon, budget=budget),
            timeout,
        )


if TYPE_CHECKING:

    def _implements_target(branch: Branch) -> Target:
        return branch  # mypy checks here that Branch implements the Target protocol
