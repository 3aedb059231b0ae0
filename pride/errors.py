"""The exception hierarchy.

Every exception pride raises on purpose derives from [`PrideError`][pride.PrideError]. Names
say who is at fault: a closed branch, a full mailbox, a provider failure.
Where a builtin means the same thing, the class also derives from it so generic
handlers keep working (``UnknownBranch`` is a ``LookupError``).

```text
PrideError
├── InvalidMessage (ValueError)        bad wire data; names the path
├── BranchNotRunning (RuntimeError)    the branch's actor was never started
├── BranchClosed                       the branch's actor has stopped
│   └── HostLost                       a remote branch's host process died or is unreachable
├── MailboxFull                        send_nowait on a full mailbox
├── ReentrancyError (RuntimeError)     A asks B asks A: would deadlock
├── TurnFinalizingError (RuntimeError) re-entry while the turn finalises
├── TurnCancelled                      the turn was cancelled (restart/shutdown/caller)
├── BudgetExceeded                     a turn ran past a Budget's limit
├── UnknownBranch (LookupError)        no such member / name
├── UnknownOperation (LookupError)     no such registered operation
├── MembershipError (ValueError)       the branch belongs to another session
├── SupervisorFailed                   restart intensity exceeded
├── InvalidFlow (ValueError)           a flow cannot start (or grow); names the node
├── FlowNodeError (LookupError)        the result of a flow node that did not complete
├── Escalate                           raised inside a turn: let the supervisor decide
├── LoopBreak                          a BREAK directive stopped a loop
├── StopStream                         a CANCEL directive ended a stream cleanly
├── ToolError                          a tool call failed (recorded, not raised, in turns)
│   └── ToolArgumentError (ValueError) arguments did not match the tool's schema
├── ParseFailed (ValueError)           text could not be parsed into the response format
├── StoreError                         the branch store cannot be opened or written
│   └── StoreLocked                    another process is writing the store
├── EnvelopeReplayed                   a remote envelope arrived again: it is not run twice
├── RemoteError                        a host raised an exception with no wire form
├── ApprovalRequired                   the turn stopped: tool calls wait for a person
├── ApprovalPending                    refused: a turn of the branch waits for approval
├── Defer                              a before_tool_call hook asks for approval
├── UnknownTurn (LookupError)          no unfinished turn with that id
├── UnknownPendingCall (LookupError)   a decision names a call the turn does not wait on
├── TurnAbandoned                      an unfinished turn was given up (restart policy)
├── JournalMismatch                    a resumed turn did not retrace its journal
└── ProviderError                      a model provider call failed
    ├── ProviderConnectionError        transport failure (connect, reset, cut stream)
    ├── ProviderTimeout                no answer within the timeout
    ├── RateLimited                    429; ``retry_after`` when the provider said
    ├── AuthenticationFailed           401/403
    ├── EndpointNotFound               404: the base URL or the model name is wrong
    ├── BadRequest                     other 4xx
    ├── ServerError                    5xx
    ├── MalformedResponse              the provider's reply could not be read; names the path
    │   └── ResponseTooLarge           the reply passed a bound of ResponseLimits
    └── ScriptExhausted                a ScriptedModel ran out of replies
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from .messages import InvalidMessage, PendingCall, PrideError

__all__ = [
    "ApprovalPending",
    "ApprovalRequired",
    "AuthenticationFailed",
    "BadRequest",
    "BranchClosed",
    "BranchNotRunning",
    "BudgetExceeded",
    "Defer",
    "EndpointNotFound",
    "EnvelopeReplayed",
    "Escalate",
    "FlowNodeError",
    "HostLost",
    "InvalidFlow",
    "InvalidMessage",
    "JournalMismatch",
    "LoopBreak",
    "MailboxFull",
    "MalformedResponse",
    "MembershipError",
    "ParseFailed",
    "PrideError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "ReentrancyError",
    "RemoteError",
    "ResponseTooLarge",
    "ScriptExhausted",
    "ServerError",
    "StopStream",
    "StoreError",
    "StoreLocked",
    "SupervisorFailed",
    "ToolArgumentError",
    "ToolError",
    "TurnAbandoned",
    "TurnCancelled",
    "TurnFinalizingError",
    "UnknownBranch",
    "UnknownOperation",
    "UnknownPendingCall",
    "UnknownTurn",
]


def exception_leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """Every non-group exception inside ``group``, depth first.

    pride's public calls raise one exception, never a group the caller did not
    open; the places that leave a nursery use this to pick that one.
    """
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(exception_leaves(exc))
        else:
            found.append(exc)
    return found


class BranchNotRunning(PrideError, RuntimeError):
    """A verb was called on a branch whose actor is not running.

    The message says how to start it: ``async with Branch(...)`` or
    ``await session.spawn(branch)``.
    """

    def __init__(self, branch_name: str) -> None:
        self.branch_name = branch_name
        super().__init__(
            f"branch {branch_name!r} is not running: start its actor with "
            "`async with branch:` (standalone) or `await session.spawn(branch)`"
        )


class BranchClosed(PrideError):
    """The target branch's actor has stopped; the envelope was not served."""

    def __init__(self, branch_name: str, detail: str = "") -> None:
        self.branch_name = branch_name
        text = f"branch {branch_name!r} is closed"
        super().__init__(f"{text}: {detail}" if detail else text)


class HostLost(BranchClosed):
    """The host process serving a remote branch died or cannot be reached.

    Raised to every caller waiting on that host (within about a second of the
    loss) and to new sends while it is down. A host the cluster restarts
    reloads its branches from its store; send again once it is back (the
    envelopes in flight at the loss were not retried: a turn never runs twice).
    ``host`` names the host process.
    """

    def __init__(self, branch_name: str, host: str, detail: str = "") -> None:
        self.host = host
        text = f"its host {host!r} was lost"
        super().__init__(branch_name, f"{text} ({detail})" if detail else text)


class EnvelopeReplayed(PrideError):
    """A remote envelope arrived at its host a second time, and was refused.

    Every envelope carries an id the host records before serving it; the same
    id again (a replayed delivery) is refused instead of running its turn twice.
    """

    def __init__(self, envelope_id: str, branch_name: str) -> None:
        self.envelope_id = envelope_id
        self.branch_name = branch_name
        super().__init__(
            f"envelope {envelope_id} to branch {branch_name!r} was already delivered; "
            "it is not run twice (send a new command to run it again)"
        )


class RemoteError(PrideError):
    """A host raised an exception whose type cannot cross the wire.

    pride's own exceptions and common builtins arrive as themselves; anything
    else (a tool's own exception class) arrives as this. ``remote_type`` is
    the original class's qualified name; the message keeps its text.
    """

    def __init__(self, remote_type: str, message: str) -> None:
        self.remote_type = remote_type
        super().__init__(f"{remote_type}: {message}" if message else remote_type)


class MailboxFull(PrideError):
    """``send_nowait`` found the branch's bounded mailbox full."""

    def __init__(self, branch_name: str, capacity: int) -> None:
        self.branch_name = branch_name
        self.capacity = capacity
        super().__init__(
            f"mailbox of branch {branch_name!r} is full ({capacity} envelopes); "
            "use `await pride.send(...)` to wait for room"
        )


class ReplyConsumedError(PrideError, RuntimeError):
    """``Reply.result()`` was awaited again after it had delivered its outcome.

    A reply delivers its outcome once, like trio's ``outcome`` values: keep the
    result of the first ``await reply.result()`` instead of asking again.
    """


class ReentrancyError(PrideError, RuntimeError):
    """A call would wait on a branch already waiting up the call chain.

    ``chain`` lists the branch names from the outermost caller to the target.
    """

    def __init__(self, chain: list[str]) -> None:
        self.chain = chain
        super().__init__(
            "reentrant call would deadlock: " + " -> ".join(chain) + " (the last branch is "
            "already waiting up this call chain)"
        )


class TurnFinalizingError(PrideError, RuntimeError):
    """A task of a turn's own lineage re-entered its branch while the turn finalises.

    Waiting would deadlock (the turn is waiting on that task), so the call fails at
    once. Schedule the work after the terminal signal instead, or retry it.
    """


class TurnCancelled(PrideError):
    """The turn was cancelled before it finished.

    ``reason`` is ``"caller"`` (the caller gave up), ``"restart"`` (a supervisor
    restarted the branch), ``"shutdown"`` (the grace period ran out) or
    ``"control"`` (a CANCEL directive).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        text = f"turn cancelled ({reason})"
        super().__init__(f"{text}: {detail}" if detail else text)


class BudgetExceeded(PrideError):
    """Work ran past a [`Budget`][pride.Budget] limit; the turn was stopped.

    Raised to the caller of the turn, after its one ``RunFailed``.

    Attributes:
        limit: the Budget field that was exceeded (``"max_model_calls"``).
        used: the figure that went past it: tokens or dollars used, the
            number of the call that was refused (``4`` for the fourth call
            under ``max_model_calls=3``), or seconds elapsed.
        allowed: the limit's value.
        scope: whose allowance it was: ``"turn"`` (the command's or the
            branch's budget) or ``"session <name>"``.
    """

    def __init__(self, limit: str, used: float, allowed: float, *, scope: str = "turn") -> None:
        self.limit = limit
        self.used = used
        self.allowed = allowed
        self.scope = scope
        super().__init__(f"{scope} budget exceeded: {_overrun(limit, used, allowed)}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only ``scope`` would be lost by the default pickling (Ray carries errors).
        return (_budget_exceeded, (self.limit, self.used, self.allowed, self.scope))


def _budget_exceeded(limit: str, used: float, allowed: float, scope: str) -> BudgetExceeded:
    return BudgetExceeded(limit, used, allowed, scope=scope)


def _overrun(limit: str, used: float, allowed: float) -> str:
    if limit in ("max_model_calls", "max_tool_calls"):
        kind = "model" if limit == "max_model_calls" else "tool"
        return (
            f"{limit}={allowed:g} allows {allowed:g} {kind} calls; call {used:g} was refused "
            "(give the work a larger Budget, or none)"
        )
    if limit == "max_cost_usd":
        return f"{limit}={allowed:g}, but ${used:.6g} was spent"
    if limit == "max_duration":
        return f"{limit}={allowed:g} s, and {used:.3g} s have passed"
    return f"{limit}={allowed:g}, but {used:g} were used"


class UnknownBranch(PrideError, LookupError):
    """No branch with that name or id is known where it was looked up."""

    def __init__(self, ref: str | UUID, where: str = "") -> None:
        self.ref = ref
        super().__init__(f"no branch {str(ref)!r}" + (f" in {where}" if where else ""))


class UnknownOperation(PrideError, LookupError):
    """No attribute or registered operation has that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no operation named {name!r} on the branch or its registry")


class MembershipError(PrideError, ValueError):
    """A branch (or child session) already belongs to another session.

    Membership is exclusive: ``remove`` it from its session first. ``include``
    checks a whole batch before changing anything.
    """


class SupervisorFailed(PrideError):
    """A session exceeded its restart intensity; ``__cause__`` is the last crash."""


class InvalidFlow(PrideError, ValueError):
    """A flow cannot start, or a node cannot join it: ``node`` names the culprit.

    Raised before any node runs for a cycle, a dependency on a node the flow
    does not have, or a target the session cannot resolve; raised by
    ``flow.add`` for a duplicate name, and by a running flow's ``add`` when
    the new node would break it (or pass ``max_spawn``).

    Attributes:
        node: the offending node's name.
        problem: what is wrong with it, and how to fix it.
        flow: the flow's name, or None.
    """

    def __init__(self, node: str, problem: str, *, flow: str | None = None) -> None:
        self.node = node
        self.problem = problem
        self.flow = flow
        where = f" of flow {flow!r}" if flow else ""
        super().__init__(f"node {node!r}{where}: {problem}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only ``flow`` would be lost by the default pickling (Ray carries errors).
        return (_invalid_flow, (self.node, self.problem, self.flow))


def _invalid_flow(node: str, problem: str, flow: str | None) -> InvalidFlow:
    return InvalidFlow(node, problem, flow=flow)


class FlowNodeError(PrideError, LookupError):
    """``flow_result[name]`` for a node that did not complete.

    Attributes:
        node: the node's name.
        outcome: ``"failed"``, ``"skipped"`` or ``"cancelled"``.
        reason: why (a failed node's error is also the ``__cause__``).
    """

    def __init__(self, node: str, outcome: str, reason: str) -> None:
        self.node = node
        self.outcome = outcome
        self.reason = reason
        super().__init__(f"flow node {node!r} has no result: it {outcome} ({reason})")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.node, self.outcome, self.reason))


class Escalate(PrideError):
    """Raise inside a turn to say: this branch's state is not to be trusted.

    The turn ends with ``RunFailed`` and its caller gets this exception; then the
    branch's supervisor applies its restart strategy.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class LoopBreak(PrideError):
    """A BREAK directive stopped the loop; the turn ends with ``RunFailed``."""


class StopStream(PrideError):
    """A CANCEL directive ended the stream cleanly (not a failure)."""


class ToolError(PrideError):
    """A tool call failed. Inside a turn it becomes an error ActionResponse."""


class ToolArgumentError(ToolError, ValueError):
    """A tool's arguments did not match its parameter schema."""


class ParseFailed(PrideError, ValueError):
    """Text could not be parsed into the requested response format.

    Attributes:
        failure_kind: how the last attempt failed: ``"extraction"`` (no JSON
            found in the text), ``"schema"`` (JSON that does not fit the
            format), or None where a single building step failed outside a
            parse. The same values as [`Unparsed.failure_kind`][pride.Unparsed].
    """

    def __init__(self, message: str, failure_kind: str | None = None) -> None:
        self.failure_kind = failure_kind
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # The default pickling would rebuild from the message alone.
        return (type(self), (str(self), self.failure_kind))


class StoreError(PrideError):
    """The branch store cannot be opened, read or written."""


class StoreLocked(StoreError):
    """Another process (or another open [`BranchStore`][pride.store.BranchStore]) is writing
    the store: one writer at a time, so that no committed turn is overwritten.

    ``path`` is the store; ``holder`` what the holder recorded about itself
    (``"pid 4242 on host since ..."``), or None if it could not be read.
    """

    def __init__(self, path: object, holder: str | None) -> None:
        self.path = path
        self.holder = holder
        who = f"another process ({holder})" if holder else "another process"
        super().__init__(
            f"{path} is in use by {who}: one process writes a store at a time; stop it "
            "or give this one another store (`pride inspect` reads a store in use)"
        )


def _listed(pending: Sequence[PendingCall]) -> str:
    return ", ".join(f"{call.function} ({call.call_id})" for call in pending) or "nothing"


class ApprovalRequired(PrideError):
    """The turn stopped before tool calls that need a person's approval.

    Nothing of the turn is lost: its completed steps are in the turn journal
    and the conversation is as it was before the turn. Continue it with
    ``await session.resolve(turn_id, {call_id: pride.Approve() |
    pride.Deny(reason)})`` (the [`Resume`][pride.Resume] command), from this
    process or, with a store, from another one after a restart.

    Attributes:
        turn_id: the suspended turn.
        pending: the calls it waits on ([`PendingCall`][pride.PendingCall]:
            ``call_id``, ``function``, ``arguments``).
        branch_name: the branch the turn belongs to.
    """

    def __init__(
        self, turn_id: UUID, pending: Sequence[PendingCall], branch_name: str = ""
    ) -> None:
        self.turn_id = turn_id
        self.pending = tuple(pending)
        self.branch_name = branch_name
        where = f" of branch {branch_name!r}" if branch_name else ""
        super().__init__(
            f"turn {turn_id}{where} waits for approval of {_listed(self.pending)}: resolve it "
            "with session.resolve(turn_id, {call_id: Approve() | Deny(reason)})"
        )

    def details(self) -> dict[str, Any]:
        """The turn id, branch and pending calls as plain data (for answer lines)."""
        return {
            "turn_id": str(self.turn_id),
            "branch": self.branch_name,
            "pending": [
                {"call_id": c.call_id, "function": c.function, "arguments": dict(c.arguments)}
                for c in self.pending
            ],
        }


class ApprovalPending(PrideError):
    """Work was refused because a turn of the branch waits for approval.

    A suspended turn's tool calls are unanswered, and a conversation with an
    unanswered tool call cannot go on (providers refuse it), so the branch
    takes no other work until the turn is resolved (approved, denied, or
    abandoned with ``Resume(turn_id, abandon=reason)``). The command was not
    started. The attributes name the waiting turn, as on
    [`ApprovalRequired`][pride.ApprovalRequired].
    """

    def __init__(
        self, turn_id: UUID, pending: Sequence[PendingCall], branch_name: str = ""
    ) -> None:
        self.turn_id = turn_id
        self.pending = tuple(pending)
        self.branch_name = branch_name
        super().__init__(
            f"branch {branch_name!r} takes no other work while turn {turn_id} waits for "
            f"approval of {_listed(self.pending)}: resolve that turn first "
            "(session.resolve(turn_id, {call_id: Approve() | Deny(reason)}))"
        )

    details = ApprovalRequired.details


class Defer(PrideError):
    """Raised (or returned) by a ``before_tool_call`` hook: this call needs a
    person's approval. The call does not run; the turn suspends with
    [`ApprovalRequired`][pride.ApprovalRequired] as for a tool declared
    ``requires_approval=True``. Once approved, the call runs without asking
    the hook to defer it again."""

    def __init__(self, reason: str = "a hook asked for approval") -> None:
        self.reason = reason
        super().__init__(reason)


class UnknownTurn(PrideError, LookupError):
    """No unfinished (suspended or interrupted) turn has that id where it was looked up."""

    def __init__(self, turn_id: UUID | str, where: str = "") -> None:
        self.turn_id = turn_id
        super().__init__(
            f"no unfinished turn {turn_id}"
            + (f" in {where}" if where else "")
            + " (it may have ended already, or belong to another branch or store)"
        )


class UnknownPendingCall(PrideError, LookupError):
    """A decision names a call the turn does not wait on."""

    def __init__(self, turn_id: UUID, call_ids: Sequence[str], pending: Sequence[str]) -> None:
        self.turn_id = turn_id
        self.call_ids = tuple(call_ids)
        waiting = ", ".join(pending) or "none"
        super().__init__(
            f"turn {turn_id} does not wait on call(s) {', '.join(map(repr, self.call_ids))} "
            f"(pending: {waiting}); nothing was changed"
        )


class TurnAbandoned(PrideError):
    """An unfinished turn was given up instead of continued: by its branch's restart
    policy (``resume="abandon"``) after a crash, or by ``Resume(turn_id, abandon=...)``.
    The conversation is as it was before the turn."""

    def __init__(self, turn_id: UUID, reason: str) -> None:
        self.turn_id = turn_id
        self.reason = reason
        super().__init__(f"turn {turn_id} abandoned: {reason}")


class JournalMismatch(PrideError):
    """A resumed turn asked for a different step than its journal holds (its
    operation, its tools or its command changed since the turn began). The turn
    fails rather than run anything twice."""


class ProviderError(PrideError):
    """A model provider call failed.

    ``status`` is the HTTP status when there was one; ``provider_message`` the
    provider's own error text; ``url`` the endpoint that was called (scheme,
    host and path only: no credentials, no query). None of them ever contains
    an API key, and the message names the URL and quotes the provider.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_message: str | None = None,
        provider: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status = status
        self.provider_message = provider_message
        self.provider = provider
        self.url = url
        super().__init__(message)


class ProviderConnectionError(ProviderError):
    """The connection failed or was cut (including mid-stream)."""


class ProviderTimeout(ProviderError):
    """The provider did not answer within the timeout."""


class RateLimited(ProviderError):
    """The provider answered 429. ``retry_after`` is in seconds when it said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kw)  # type: ignore[arg-type]


class AuthenticationFailed(ProviderError):
    """The provider rejected the credentials (401/403)."""


class EndpointNotFound(ProviderError):
    """The provider answered 404: nothing at that URL, or no such model.

    The message names the URL that answered; the usual causes are a
    ``base_url`` missing its ``/v1`` (or pointing at the wrong server) and a
    misspelt model name. Not retried.
    """


class BadRequest(ProviderError):
    """The provider rejected the request (4xx other than 401/403/404/408/429)."""


class ServerError(ProviderError):
    """The provider failed on its side (5xx)."""


class MalformedResponse(ProviderError):
    """The provider's reply (JSON or SSE) could not be read.

    ``path`` names the offending value when the reply was JSON of the wrong
    shape (``choices[0].message.tool_calls``; prefixed by ``event 3:`` in a
    stream), else it is ``None``. Not retried: the same request would most
    likely get the same reply.
    """

    def __init__(self, message: str, *, path: str | None = None, **kw: object) -> None:
        self.path = path
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ResponseTooLarge(MalformedResponse):
    """The reply passed a bound of the model's ``ResponseLimits``; reading stopped there.

    ``limit`` names the bound (``"max_body_bytes"``, ``"max_event_bytes"``,
    ``"max_stream_bytes"``) and ``allowed`` its value in bytes.
    """

    def __init__(self, message: str, *, limit: str, allowed: int, **kw: object) -> None:
        self.limit = limit
        self.allowed = allowed
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ScriptExhausted(ProviderError):
    """A ScriptedModel was called more times than it has replies."""
