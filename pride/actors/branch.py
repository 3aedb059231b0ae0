"""Branch: one conversation, as an aggregate and as an actor.

The Branch object owns one conversation's state (ADR-0016 D1): its messages,
tools, models, logs and named operations, plus identity. Its verbs
(``chat``, ``operate``, ``ReAct``, ...) are thin adapters: each builds a
command and asks the branch's actor, which runs the algorithm from
`pride.operations` as one turn.

Run a standalone branch with ``async with Branch(...) as branch:`` (a
private supervisor), or hand it to a session with ``session.spawn(branch)``.
"""

from __future__ import annotations

import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Self
from uuid import UUID

import trio

from ..context import CapabilityGrant, ContextProviderRegistry
from ..context.capabilities import apply_block, observe
from ..errors import BranchClosed, BranchNotRunning, Escalate, UnknownOperation, exception_leaves
from ..llm import iModel
from ..memory import InMemoryStore, MemoryStore
from ..messages import (
    DEFAULT_SYSTEM_MESSAGE,
    Act,
    ActionCall,
    AssistantResponse,
    Attach,
    Call,
    Chat,
    ChatAndRecord,
    Communicate,
    Interpret,
    MessageAdded,
    Operate,
    Parse,
    ReAct,
    ReActStream,
    RoledMessage,
    Run,
    Signal,
    Stop,
    System,
    WorkCommand,
)
from ..messages.history import History
from ..operations import execute as execute_operation
from ..operations.registry import OperationManager
from ..tools import ActionManager
from . import actor, projection, turn, waits
from .connect import (
    DEFAULT_CAPACITY_REFRESH_TIME,
    DEFAULT_QUEUE_CAPACITY,
    connect as _connect,
)
from .logs import DataLogger, LogConfig
from .mailbox import Mailbox, MailboxStatistics, Reply
from .send import ask, stream
from .target import announce_live, live_target, withdraw_live

if TYPE_CHECKING:
    import contextlib

    from ..tools import Tool
    from .send import StreamItems
    from .target import Target

__all__ = ["DEFAULT_MAILBOX_SIZE", "Branch", "HookSink", "SignalSink", "live_branch"]

log = logging.getLogger("pride.branch")

DEFAULT_MAILBOX_SIZE = 64
"""Work envelopes a branch's mailbox holds before ``send`` waits."""

PRIDE_SYSTEM_MESSAGE = (
    "You are an agent running on pride, an actor runtime: each conversation is served "
    "one turn at a time. Use the tools you are offered when they help, and answer "
    "plainly when they do not."
)
"""pride's built-in preamble, prepended when ``use_lion_system_message=True``."""


def live_branch(branch_id: UUID) -> Branch | None:
    """The branch with this id whose actor is running in this process, if any."""
    found: Branch | None = live_target(branch_id)
    return found


class SignalSink(Protocol):
    """What a branch needs of an observer (a session attaches a real one).

    ``dispatch`` runs synchronous subscribers at once (isolating their
    failures) and returns an awaitable for the asynchronous ones, or None.
    """

    def dispatch(self, signal: Signal) -> Any: ...


class HookSink(Protocol):
    """What a branch needs of a session's hook bus.

    ``emit(point, payload)`` returns None or an awaitable. For blocking points
    (``before_tool_call``) an exception denies the action; other points
    isolate handler failures themselves.
    """

    def emit(self, point: str, payload: Mapping[str, Any]) -> Any: ...


class Branch:
    """One conversation: its state, its facade verbs, and (while running) its actor.

    Args:
        user: who the conversation is with (an id or name).
        name: a stable, human name (sessions resolve names; stores key on it).
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
    """

    # Slots, not a __dict__: an idle branch should cost little (100,000 of
    # them is a benchmark target). Subclasses get a __dict__ unless they
    # declare slots too.
    __slots__ = (
        "__weakref__",
        "_actions",
        "_active_turn",
        "_background",
        "_capabilities",
        "_chat_model",
        "_directory",
        "_hooks",
        "_last_context_report",
        "_logs",
        "_mailbox",
        "_memory",
        "_message_listeners",
        "_messages",
        "_observer",
        "_operations",
        "_owner_id",
        "_parse_model",
        "_private_cm",
        "_private_supervisor",
        "_providers",
        "_rewrite_listeners",
        "_serving",
        "_turn_barriers",
        "created_at",
        "id",
        "id_str",
        "mailbox_size",
        "metadata",
        "name",
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
        self.name: str = name if name is not None else f"branch-{str(self.id)[:8]}"
        self.stable_name = name is not None  # a store restores only branches named by code
        self.user = user
        self.created_at: float = created_at if created_at is not None else time.time()
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.mailbox_size = mailbox_size

        # The five managers (ADR-0016 D1).
        self._messages = History(messages or ())
        self._actions = ActionManager()
        self._chat_model = iModel.from_spec(chat_model)
        self._parse_model = (
            self._chat_model if parse_model is None else iModel.from_spec(parse_model)
        )
        self._logs = DataLogger(LogConfig.coerce(log_config), logs)
        self._operations = OperationManager()

        if tools is not None:
            self._actions.register(tools)
        system_message = _make_system(system, system_datetime, use_lion_system_message)
        if system_message is not None:
            if system_sender is not None:
                import attrs

                system_message = attrs.evolve(system_message, sender=system_sender)
            self._messages.set_system(system_message)

        # Branch-scoped live extensions (created lazily).
        if memory is not None and not isinstance(memory, MemoryStore):
            raise TypeError(
                f"memory must be a MemoryStore (store/retrieve/search), got {type(memory).__name__}"
            )
        self._memory: MemoryStore | None = memory
        self._providers: ContextProviderRegistry | None = None
        self._capabilities: CapabilityGrant | None = None
        self._message_listeners: list[Callable[[Branch, RoledMessage], None]] = []
        self._rewrite_listeners: list[Callable[[Branch], None]] | None = None
        # Awaited at the end of every turn, before its terminal signal and reply
        # (a store's commit); a failure fails the turn.
        self._turn_barriers: list[Callable[[], Awaitable[None]]] = []

        # Session attachments (ADR-0016 D4), applied between turns by Attach/Detach.
        self._observer: SignalSink | None = observer
        self._hooks: HookSink | None = None
        self._owner_id: UUID | None = None
        self._directory: Any = None

        # Runtime state: never serialised.
        self._mailbox: Mailbox | None = None
        self._background: trio.Nursery | None = None
        self._active_turn: turn.TurnExecutionContext | None = None
        self._last_context_report: Any = None
        self._private_supervisor: trio.Nursery | None = None
        self._private_cm: Any = None
        self._serving: Any = None  # the Reply the actor took last (a supervisor cancels it)

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<Branch {self.name!r} {state}, {len(self._messages)} messages>"

    # ------------------------------------------------------------ managers

    @property
    def messages(self) -> History:
        """The recorded conversation, in order (``len()``, iteration, indexing)."""
        return self._messages

    @property
    def msgs(self) -> History:
        """Alias of [`messages`][pride.actors.branch.Branch.messages] (the reference system's
        name)."""
        return self._messages

    @property
    def system(self) -> System | None:
        """The conversation's system message, if any."""
        return self._messages.system

    @property
    def acts(self) -> ActionManager:
        """The tool registry (the action manager)."""
        return self._actions

    @property
    def tools(self) -> Mapping[str, Any]:
        """Registered tools by name."""
        return self._actions.tools

    def register_tools(self, tools: Any, *, update: bool = False) -> None:
        """Register callables or Tools; duplicate names raise unless ``update``."""
        self._actions.register(tools, update=update)

    def register_mcp(
        self,
        server: Any,
        *,
        prefix: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
    ) -> tuple[str, ...]:
        """Register an MCP server's tools (the handle ``session.spawn_mcp`` returned).

        Each tool keeps the server's name and JSON schema, with ``prefix``
        prepended when given; ``include``/``exclude`` pick tools by their
        server names. The registration follows the server: tools it adds,
        changes or drops (``notifications/tools/list_changed``, a restart)
        are updated here. Returns the registered names. See docs/mcp.md.

        Raises:
            TypeError: ``server`` is not an MCP server handle.
            ValueError: a name is already registered, or ``include`` names a
                tool the server does not have.
        """
        register = getattr(server, "register_with", None)
        if register is None:
            raise TypeError(
                f"register_mcp needs the handle session.spawn_mcp(...) returned, "
                f"got {type(server).__name__}"
            )
        names: tuple[str, ...] = register(
            self._actions, owner=self.name, prefix=prefix, include=include, exclude=exclude
        )
        return names

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

    @property
    def logs(self) -> DataLogger:
        """Model and tool call records (bounded by the log config's capacity)."""
        return self._logs

    def dump_logs(self, path: Any = None, *, clear: bool = True) -> Any:
        """Write the logs as JSON lines to ``path`` (see
        [`DataLogger.dump`][pride.actors.logs.DataLogger.dump])."""
        return self._logs.dump(path, clear=clear)

    @property
    def operations(self) -> OperationManager:
        """The named-operation registry (shared with the session while attached)."""
        return self._operations

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` under ``name``.

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
        """The operation called ``name``: a Branch attribute first, then the registry."""
        if hasattr(self, name):
            found: Callable[..., Any] = getattr(self, name)
            return found
        return self._operations.get(name)

    # ------------------------------------------------- branch-scoped extensions

    @property
    def memory(self) -> MemoryStore:
        """The branch's memory store (ADR-0016 D3); no setter.

        The store given to the constructor (kept by identity), else a session's
        default adopted on attachment, else a private [`InMemoryStore`][pride.InMemoryStore]
        created on first access. Reading it claims it: a session attached
        later does not replace it. Never serialised, never cloned.
        """
        if self._memory is None:
            self._memory = InMemoryStore()
        return self._memory

    @property
    def providers(self) -> ContextProviderRegistry:
        """The context-provider registry, created on first access (falsy while empty)."""
        if self._providers is None:
            self._providers = ContextProviderRegistry()
        return self._providers

    @property
    def capabilities(self) -> CapabilityGrant | None:
        """The current capability grant, if any (see
        [`grant_capabilities`][pride.actors.branch.Branch.grant_capabilities])."""
        return self._capabilities

    def grant_capabilities(self, operable: type, *, prompt: bool = True) -> CapabilityGrant:
        """Grant the structured outputs ``operable``'s fields describe (ADR-0016 D3).

        From now on every recorded assistant message is observed: fenced JSON
        blocks using granted keys become ``StructuredOutput`` (valid),
        ``EmissionRejected`` (invalid) or ``CapabilityViolation`` (mixed with
        other keys) signals. Observation only: nothing is executed.

        Args:
            operable: an attrs class, a dataclass or a pydantic model class;
                its field names are the granted keys.
            prompt: also describe the grant in the system prompt, between
                ``CAP_BEGIN``/``CAP_END`` markers, replacing a previous
                balanced block (a system message is created if there is none).
                False installs only the runtime grant.

        Returns:
            the installed grant.

        Raises:
            TypeError: ``operable`` is not one of those classes.
        """
        grant = CapabilityGrant.from_operable(operable)
        self._capabilities = grant
        if prompt:
            self._messages.set_system(apply_block(self.system, grant.render_prompt()))
        return grant

    def revoke_capabilities(self) -> None:
        """Clear the grant and remove a balanced capability block from the system prompt."""
        self._capabilities = None
        self._messages.set_system(apply_block(self.system, None))

    def connect(
        self,
        provider: str | None = None,
        base_url: str | None = None,
        endpoint: str = "chat",
        api_key: str | None = None,
        *,
        queue_capacity: int = DEFAULT_QUEUE_CAPACITY,
        capacity_refresh_time: float = DEFAULT_CAPACITY_REFRESH_TIME,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        imodel: iModel | None = None,
        name: str | None = None,
        description: str | None = None,
        request_options: Mapping[str, Any] | None = None,
        update: bool = False,
        **kwargs: Any,
    ) -> Tool:
        """Offer another model to this branch's model as a tool (ADR-0016 D5).

        The tool takes ``instruction`` (text), asks the connected model once
        and returns its reply. Give ``imodel=`` or the model's configuration
        (``model="provider/name"``, limits, request options), forwarded to
        [`iModel`][pride.iModel] (queue capacity 100, refresh 60 s by default).
        Returns the registered Tool; see `pride.actors.connect.connect`
        for every argument and error.
        """
        return _connect(
            self,
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
            update=update,
            **kwargs,
        )

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
        """The branch's serialised projection (ADR-0016 D2; see
        [`pride.actors.projection`][pride.actors.projection]).

        Identity (``id``, ``created_at``, ``metadata``, ``user``, ``name``),
        then ``messages`` (always), ``logs`` (when included and not empty),
        ``system`` (when there is one), ``log_config`` (when included),
        ``chat_model`` (always) and ``parse_model`` (when distinct). No API
        key, tool, provider, memory, grant, operation or session reference.

        Args:
            mode: ``"python"``, ``"json"`` (JSON-safe) or ``"db"`` (JSON-safe,
                metadata under ``db_meta_key``, default ``"node_metadata"``).
            db_meta_key: the metadata key in ``"db"`` mode.
            include_request_options: export the models' request options.
            include_logs: export the call log (omitted when empty anyway).
            include_log_config: export the log configuration.
            include_processor_config: export the models' rate-limit settings.

        Raises:
            ValueError: an unknown mode.
            InvalidMessage: in ``"json"``/``"db"`` mode, metadata JSON cannot carry.
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
        """A standalone branch from [`to_dict`][pride.actors.branch.Branch.to_dict] output; ``data``
        is left unchanged.

        ``chat_model``/``parse_model`` replace the serialised models (which
        never carry a key: give one here, or set it in the environment). A
        top-level ``system`` is used only when the messages hold none. Tools,
        providers, memory, capabilities and operations are re-wired by code.

        Raises:
            InvalidMessage: naming every offending path.
        """
        return projection.from_dict(
            cls, data, chat_model=chat_model, parse_model=parse_model, db_meta_key=db_meta_key
        )

    def clone(self, sender: str | UUID | None = None) -> Branch:
        """A new branch with a copy of this conversation (ADR-0016 D5); not started.

        Messages get fresh ids, ``sender`` (default: this branch's id) as
        sender and the clone as recipient; tools and models carry over (a
        distinct parse model stays distinct); ``metadata["clone_from"]`` holds
        this branch's id, user, created_at and message ids. Logs, memory,
        providers, capabilities, operations and session wiring do not.
        Start it with ``async with`` or ``session.spawn``.

        Raises:
            TypeError: ``sender`` is not a str or UUID.
        """
        return projection.clone(self, sender)

    async def aclone(self, sender: str | UUID | None = None) -> Branch:
        """[`clone`][pride.actors.branch.Branch.clone], after a checkpoint.

        Messages are recorded synchronously by the actor, so the copy is
        taken between two recordings, never in the middle of one.
        """
        await trio.lowlevel.checkpoint()
        return projection.clone(self, sender)

    # ------------------------------------------------------------ messages

    def add_message(self, message: RoledMessage) -> RoledMessage:
        """Record ``message`` and tell observers, hooks and listeners.

        Returns the message. A system message replaces the current one.
        """
        self._messages.append(message)
        if self._message_listeners:
            self._notify(self._message_listeners, "message", message)
        if self._observer is not None:
            scope = turn.live_scope_for(self)
            self._schedule_signal(
                MessageAdded(
                    branch_id=self.id,
                    branch_name=self.name,
                    message=message,
                    turn_id=scope.turn_id if scope is not None else None,
                )
            )
            if self._capabilities is not None and isinstance(message, AssistantResponse):
                self._observe_capabilities(message, scope)
        if self._hooks is not None:
            self.fire_hook("message_added", {"branch": self, "message": message})
        return message

    def _observe_capabilities(self, message: AssistantResponse, scope: Any) -> None:
        """Emit the capability signals of an assistant reply (observation only, ADR-0016 D3)."""
        turn_id = scope.turn_id if scope is not None else None
        grant = self._capabilities
        assert grant is not None
        signals = observe(
            grant, message.text, branch_id=self.id, branch_name=self.name, turn_id=turn_id
        )
        for signal in signals:
            self._schedule_signal(signal)

    def add_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Call ``listener(branch, message)`` synchronously for every recorded message."""
        self._message_listeners.append(listener)

    def remove_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Stop calling ``listener``."""
        self._message_listeners.remove(listener)

    def add_rewrite_listener(self, listener: Callable[[Branch], None]) -> None:
        """Call ``listener(branch)`` synchronously after the history changes other
        than by a recorded message: cleared (``communicate(clear_messages=True)``,
        ``branch.messages.clear()``) or its system message replaced or removed
        (``branch.messages.set_system``). The listener reads ``branch.messages``
        anew."""
        if self._rewrite_listeners is None:
            self._rewrite_listeners = []
            self._messages.on_rewrite = self._history_rewritten
        self._rewrite_listeners.append(listener)

    def remove_rewrite_listener(self, listener: Callable[[Branch], None]) -> None:
        """Stop calling ``listener``."""
        listeners = self._rewrite_listeners
        if listeners is None or listener not in listeners:
            raise ValueError(f"{listener!r} is not a rewrite listener of branch {self.name!r}")
        listeners.remove(listener)
        if not listeners:
            self._rewrite_listeners = None
            self._messages.on_rewrite = None

    def _history_rewritten(self) -> None:
        self._notify(self._rewrite_listeners or [], "history")

    def _notify(self, listeners: list[Callable[..., None]], kind: str, *args: Any) -> None:
        """Call each listener with the branch (and ``args``); a failing one is
        logged and the others still run."""
        for listener in list(listeners):
            try:
                listener(self, *args)
            except Exception:
                log.exception("%s listener of branch %r failed", kind, self.name)

    # ------------------------------------------------------------ signals

    async def _emit_lifecycle(self, signal: Signal) -> None:
        """Deliver a lifecycle signal and wait for its async subscribers.

        The wait is bounded by ``FINALIZE_GRACE``: a subscriber that does not
        finish by then is cancelled (and logged), so none can hold a turn.
        """
        observer = self._observer
        if observer is None:
            return
        try:
            pending = observer.dispatch(signal)
            if pending is not None:
                what = f"async observers of {type(signal).__name__} of branch {self.name!r}"
                await actor.await_bounded(pending, what, log)
        except Exception:
            log.exception("observer failed on %s of branch %r", type(signal).__name__, self.name)

    def emit(self, signal: Signal) -> None:
        """Deliver ``signal`` to the attached observer.

        Inside a live turn its async subscribers are drained before the
        turn's terminal signal; outside one they run as best-effort
        background work of the actor.
        """
        if self._observer is not None:
            self._schedule_signal(signal)

    def _schedule_signal(self, signal: Signal) -> None:
        assert self._observer is not None
        try:
            pending = self._observer.dispatch(signal)
        except Exception:
            log.exception("observer failed on %s of branch %r", type(signal).__name__, self.name)
            return
        if pending is not None:
            self._spawn_signal_work(pending, type(signal).__name__)

    def fire_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Fire a non-blocking hook point; async handlers join the turn's signal drain."""
        hooks = self._hooks
        if hooks is None:
            return
        try:
            pending = hooks.emit(point, payload)
        except Escalate:
            raise  # a hook may hand the branch to its supervisor, as a tool can
        except Exception:
            log.exception("hook %s of branch %r failed", point, self.name)
            return
        if pending is not None:
            self._spawn_signal_work(pending, f"hook {point}")

    async def run_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Run a hook point and wait for it; exceptions propagate (blocking points)."""
        hooks = self._hooks
        if hooks is None:
            return
        pending = hooks.emit(point, payload)
        if pending is not None:
            await pending

    def _spawn_signal_work(self, pending: Any, what: str) -> None:
        scope = turn.live_scope_for(self)
        if scope is not None and scope.context.host is not None:
            # The turn's task group logs a failure and records an Escalate,
            # which then escalates the turn.
            scope.context.signal_group().start_soon(_awaited, pending)
            return
        nursery = self._background
        if nursery is None:
            pending.close()
            log.warning(
                "branch %r: async subscribers of %s dropped (no running actor to host them)",
                self.name,
                what,
            )
            return
        nursery.start_soon(_isolated, pending, f"{what} of branch {self.name!r}")

    # ---------------------------------------------------------- attachments

    def _attach(self, command: Attach) -> None:
        _check_attachment(command)  # all or nothing: a bad Attach leaves the wiring as it was
        self._owner_id = command.owner_id
        self._observer = command.observer
        self._hooks = command.hooks
        self._directory = command.directory
        if command.operations is not None:
            self._operations = command.operations
        if self._memory is None and command.memory is not None:
            self._memory = command.memory  # first claim: never replace a store in use

    def _detach(self) -> None:
        self._owner_id = None
        self._observer = None
        self._hooks = None
        self._directory = None
        self._operations = OperationManager()

    @property
    def owner_id(self) -> UUID | None:
        """The id of the session this branch belongs to, if any."""
        return self._owner_id

    # ------------------------------------------------------------- control

    def control(
        self, directive: Any, *, reason: str | None = None, turn_id: UUID | None = None
    ) -> bool:
        """Write a loop directive into the active turn (ADR-0018 D3); never queues.

        Returns False, storing nothing, when no turn is active (or it is
        finalising) or ``turn_id`` names another turn. Last write wins.

        Raises:
            TypeError: ``directive`` is not a LoopDirective, or ``turn_id`` not a UUID.
        """
        if not isinstance(directive, turn.LoopDirective):
            raise TypeError(f"directive must be a LoopDirective, got {type(directive).__name__}")
        context = self._addressed_turn(turn_id)
        if context is None:
            return False
        context.control = turn.LoopControl(directive, reason)
        return True

    def poll_control(self, *, turn_id: UUID | None = None) -> turn.LoopControl | None:
        """Take the active turn's pending directive (clearing it), if any."""
        context = self._addressed_turn(turn_id)
        if context is None:
            return None
        control, context.control = context.control, None
        return control

    def _addressed_turn(self, turn_id: UUID | None) -> turn.TurnExecutionContext | None:
        if turn_id is not None and not isinstance(turn_id, UUID):
            raise TypeError(f"turn_id must be a UUID, got {type(turn_id).__name__}")
        context = self._active_turn
        if context is None or context.phase != "active":
            return None
        if turn_id is not None and turn_id != context.turn_id:
            return None
        return context

    @property
    def active_turn_id(self) -> UUID | None:
        """The id of the turn running now, if any."""
        context = self._active_turn
        return context.turn_id if context is not None else None

    @property
    def last_context_report(self) -> Any:
        """The context-provider report of the last finished top-level turn.

        Published when that turn finalises (before its caller's ``ask``
        returns); None after a turn with no providers.
        """
        return self._last_context_report

    # --------------------------------------------------------------- actor

    @property
    def running(self) -> bool:
        """True while the branch's mailbox accepts commands."""
        return self._mailbox is not None and not self._mailbox.closed

    @property
    def _waiting_on(self) -> dict[Any, int]:
        """The targets this branch's turn waits on now, with how many waits each."""
        return waits.waiting_on(self)

    def mailbox_statistics(self) -> MailboxStatistics | None:
        """A snapshot of the mailbox, or None if the actor never started."""
        return self._mailbox.statistics() if self._mailbox is not None else None

    async def deliver(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox (the [`Target`][pride.Target] protocol).

        Work waits while the mailbox is full; priority commands never wait.
        Returns without a checkpoint when there was room (the send API
        checkpoints around it).

        Raises:
            BranchNotRunning: the actor was never started.
            BranchClosed: the branch has stopped.

        Cancellation: cancelled while waiting for room, nothing was queued.
        """
        mailbox = self._require_mailbox()
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
        else:
            await mailbox.put(envelope, checkpoint=False)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox now (the [`Target`][pride.Target] protocol).

        Raises:
            MailboxFull: the work lane is full.
            BranchNotRunning, BranchClosed: as for [`deliver`][pride.actors.branch.Branch.deliver].
        """
        mailbox = self._require_mailbox()
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
        else:
            mailbox.put_nowait(envelope)

    def _require_mailbox(self) -> Mailbox:
        mailbox = self._mailbox
        if mailbox is None:
            raise BranchNotRunning(self.name)
        if mailbox.closed:
            raise BranchClosed(self.name)
        return mailbox

    def _open_mailbox(self) -> Mailbox:
        """The mailbox to serve: the current one if still open, else a new one."""
        if self._mailbox is None or self._mailbox.closed:
            self._mailbox = Mailbox(self.name, self.mailbox_size)
        announce_live(self)
        return self._mailbox

    def _close_mailbox(self, detail: str) -> None:
        """Close the mailbox and answer everything queued with BranchClosed."""
        mailbox = self._mailbox
        if mailbox is None or mailbox.closed:
            return
        answered = [reply for reply in mailbox.close() if reply.state != "dropped"]
        for reply in answered:  # a dropped one's caller has gone: nobody to answer
            reply.fail(BranchClosed(self.name, detail))
        if answered:
            count = len(answered)
            log.info("branch %r: answered %d queued envelopes with BranchClosed", self.name, count)
        withdraw_live(self)

    async def serve(
        self, host: trio.Nursery | None = None, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> str:
        """Run this branch's actor in the calling task until it is stopped.

        For supervisors: ``await nursery.start(branch.serve)`` returns once the
        actor accepts commands. Pass a ``host`` nursery that outlives the actor
        (``nursery.start(branch.serve, nursery)``) to run the turns' nested
        work in it instead of a nursery of the actor's own (lighter for many
        idle branches). Returns the stop reason.
        """
        mailbox = self._open_mailbox()
        return await actor.serve(self, mailbox, host, task_status=task_status)

    async def __aenter__(self) -> Self:
        if self.running:
            raise RuntimeError(f"branch {self.name!r} is already running")
        cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        self._private_cm = cm
        self._private_supervisor = nursery
        try:
            await nursery.start(self.serve)
        except BaseException as exc:
            await cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        cm, self._private_cm = self._private_cm, None
        private, self._private_supervisor = self._private_supervisor, None
        mailbox = self._mailbox
        # A session took the actor over (include): the mailbox is no longer ours.
        adopted = self._owner_id is not None and private is not None and not private.child_tasks
        if mailbox is not None and not mailbox.closed and not adopted:
            # Stop after the current turn; queued envelopes are answered BranchClosed.
            mailbox.put_priority(Reply(self, Stop()))
        try:
            return await _exit_unwrapped(cm, exc_info)  # type: ignore[no-any-return]
        finally:
            if not adopted:
                self._close_mailbox("the branch's actor exited")

    def _suspend(self, cancel_reason: str | None) -> Any:
        """For supervisors: leave the actor loop after the current item, keeping the mailbox.

        With ``cancel_reason`` the item being served is cancelled first (its
        caller gets ``TurnCancelled(cancel_reason)``); without, it finishes.
        Returns the Reply of the ``Suspend`` (answered when the loop leaves).

        Raises:
            BranchNotRunning, BranchClosed: no mailbox to suspend.
        """
        reply = Reply(self, actor.Suspend())
        self._require_mailbox().put_priority(reply, first=True)
        serving = self._serving
        if cancel_reason is not None and serving is not None and serving.state == "running":
            serving.cancel(cancel_reason)
        return reply

    # --------------------------------------------------------------- verbs

    async def _run_inline(self, command: WorkCommand, scope: turn.TurnScope | None) -> Any:
        """Run ``command``'s operation in the calling task (the driver or a nested call)."""
        if isinstance(command, Call):
            name = command.operation
            if not isinstance(name, str):
                raise TypeError(f"Call.operation must be a str, got {type(name).__name__}")
            if hasattr(self, name):  # attribute first: a bound verb takes no branch argument
                return await _verb(self, name)(**command.kwargs)
            operation = self._operations.get(name)
            if operation is None:
                raise UnknownOperation(name)
            return await operation(self, **command.kwargs)
        return await execute_operation(self, command, scope)

    async def chat(self, instruction: str = "", *, timeout: float | None = None, **kw: Any) -> Any:
        """One model call over the history; records nothing. See [`Chat`][pride.Chat]."""
        return await ask(self, Chat(instruction, **kw), timeout)

    async def chat_and_record(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """Chat, then record the instruction and response. See
        [`ChatAndRecord`][pride.ChatAndRecord]."""
        return await ask(self, ChatAndRecord(instruction, **kw), timeout)

    async def communicate(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """Chat, record both messages, optionally parse. See [`Communicate`][pride.Communicate]."""
        return await ask(self, Communicate(instruction, **kw), timeout)

    async def operate(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """A structured turn with optional tool actions. See [`Operate`][pride.Operate]."""
        return await ask(self, Operate(instruction, **kw), timeout)

    async def parse(self, text: str, *, timeout: float | None = None, **kw: Any) -> Any:
        """Parse text into a response format. See [`Parse`][pride.Parse]."""
        return await ask(self, Parse(text, **kw), timeout)

    async def interpret(self, text: str, *, timeout: float | None = None, **kw: Any) -> Any:
        """Rewrite raw input into a clearer prompt. See [`Interpret`][pride.Interpret]."""
        return await ask(self, Interpret(text, **kw), timeout)

    async def act(self, action_request: Any, *, timeout: float | None = None, **kw: Any) -> Any:
        """Execute tool calls and record them. See [`Act`][pride.Act].

        ``action_request`` is one call or a list of calls, each an
        [`ActionCall`][pride.ActionCall], a ``{"function", "arguments"}`` dict, or a
        tool-call object with ``name``/``arguments``.
        """
        calls = action_request if isinstance(action_request, list | tuple) else [action_request]
        requests = tuple(_action_call(call) for call in calls)
        return await ask(self, Act(requests, **kw), timeout)

    async def ReAct(self, instruction: str = "", *, timeout: float | None = None, **kw: Any) -> Any:
        """Think-act-observe, then answer. See [`ReAct`][pride.ReAct]."""
        return await ask(self, ReAct(instruction, **kw), timeout)

    def ReActStream(
        self, instruction: str = "", **kw: Any
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """``async with branch.ReActStream(...) as rounds:`` — see
        [`ReActStream`][pride.ReActStream]."""
        return stream(self, ReActStream(instruction, **kw))

    def run(
        self, instruction: str = "", **kw: Any
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """``async with branch.run(...) as items:`` — see [`Run`][pride.Run]."""
        return stream(self, Run(instruction, **kw))

    async def call(self, operation: str, /, *, timeout: float | None = None, **kw: Any) -> Any:
        """Run a registered operation as a turn. See [`Call`][pride.Call]."""
        return await ask(self, Call(operation, **kw), timeout)


# ------------------------------------------------------------------ helpers


def _make_system(
    system: System | str | None, system_datetime: bool | str | None, lion: bool
) -> System | None:
    if system and not isinstance(system, System | str):
        raise TypeError(f"system must be a str or a System message, got {type(system).__name__}")
    if not (system or system_datetime or lion):
        return None
    if isinstance(system, System):
        base = system
    else:
        base = System(system_message=system or DEFAULT_SYSTEM_MESSAGE)
    stamp: str | None = base.system_datetime
    if system_datetime is True:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    elif isinstance(system_datetime, str) and system_datetime:
        stamp = system_datetime
    text = base.system_message
    if lion:
        text = f"{PRIDE_SYSTEM_MESSAGE}\n\n{text}" if system else PRIDE_SYSTEM_MESSAGE
    import attrs

    return attrs.evolve(base, system_message=text, system_datetime=stamp)


def _action_call(call: Any) -> ActionCall:
    if isinstance(call, ActionCall):
        return call
    if isinstance(call, Mapping):
        return ActionCall(call["function"], dict(call.get("arguments") or {}), call.get("call_id"))
    name = getattr(call, "name", None) or getattr(call, "function", None)
    if isinstance(name, str):
        return ActionCall(
            name, dict(getattr(call, "arguments", {}) or {}), getattr(call, "id", None)
        )
    raise TypeError(f"cannot read an action request from {type(call).__name__}")


# Public async methods that are no operation: the actor's own loop, firing hook
# points (a request would forge their payloads), copying the branch.
_NOT_VERBS = frozenset({"serve", "run_hook", "aclone"})


def _verb(branch: Branch, name: str) -> Callable[..., Any]:
    """The Branch attribute ``name`` as a Call may run it: a public async verb.

    A Call can arrive as data from anywhere, so attribute-first lookup stops at
    the verbs: never a private helper, the actor's own loop, or a sync method
    with side effects (``dump_logs`` writes files).

    Raises:
        UnknownOperation: the attribute is not such a verb.
    """
    found = getattr(branch, name)
    if name.startswith("_") or name in _NOT_VERBS or not inspect.iscoroutinefunction(found):
        raise UnknownOperation(name)
    return found  # type: ignore[no-any-return]


def _check_attachment(command: Attach) -> None:
    """Refuse an Attach whose references cannot do their job.

    Raises:
        TypeError: naming the field (an observer without ``dispatch``, hooks
            without ``emit``, a directory without ``resolve``, an operation
            registry or memory store of the wrong type, an owner id that is
            not a UUID).
    """
    for field, method in (("observer", "dispatch"), ("hooks", "emit"), ("directory", "resolve")):
        value = getattr(command, field)
        if value is not None and not callable(getattr(value, method, None)):
            raise TypeError(
                f"Attach.{field} must have a {method}() method, got {type(value).__name__}"
            )
    wrong = (
        ("operations", OperationManager, "an OperationManager"),
        ("memory", MemoryStore, "a MemoryStore"),
        ("owner_id", UUID, "a UUID"),
    )
    for field, expected, what in wrong:
        value = getattr(command, field)
        if value is not None and not isinstance(value, expected):
            raise TypeError(f"Attach.{field} must be {what}, got {type(value).__name__}")


async def _awaited(pending: Any) -> None:
    await pending


async def _isolated(pending: Any, what: str) -> None:
    # Outside a turn there is nothing to escalate: an Escalate is a failure like
    # any other, logged, so it cannot take the host nursery (the supervisor's) down.
    try:
        await pending
    except Exception:
        log.exception("async subscriber of %s failed", what)


async def _exit_unwrapped(cm: Any, exc_info: tuple[Any, ...]) -> Any:
    """Leave a private nursery, re-raising a lone crash bare rather than as a group."""
    try:
        return await cm.__aexit__(*exc_info)
    except BaseExceptionGroup as group:
        leaves = exception_leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


if TYPE_CHECKING:

    def _implements_target(branch: Branch) -> Target:
        return branch  # mypy checks here that Branch implements the Target protocol
