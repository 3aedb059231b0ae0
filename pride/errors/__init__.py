"""The exception hierarchy: one tree, rooted at PrideError.

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
├── ReplyConsumedError (RuntimeError) a Reply's result was awaited a second time
├── ReentrancyError (RuntimeError)     A asks B asks A: would deadlock
├── TurnFinalizingError (RuntimeError) re-entry while the turn finalises
├── TurnCancelled                      the turn was cancelled (restart/shutdown/caller)
├── BudgetExceeded                     a turn ran past a Budget's limit
├── UnknownBranch (LookupError)        no such member / name
├── UnknownOperation (LookupError)     no such registered operation
├── MembershipError (ValueError)       the branch belongs to another session
├── SupervisorFailed                   restart intensity exceeded
├── VirtualKindError (ValueError)      a kind of virtual branches cannot be registered
├── ActivationFailed                   a virtual branch could not be activated; names it
├── InvalidFlow (ValueError)           a flow cannot start (or grow); names the node
├── FlowNodeError (LookupError)        the result of a flow node that did not complete
├── UnknownFlow (LookupError)          no unfinished flow with that id in the store
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

The tree is one package: each private module holds a branch of it
(``_delivery``: reaching a branch; ``_turns``: how a turn ends; ``_supervision``:
sessions and flows; ``_durable``: the store and durable turns; ``_provider``:
model calls), and every class is imported from here, ``pride.errors.X``
(most also as ``pride.X``).
"""

from .._public import publish as _publish
from ..messages import InvalidMessage as InvalidMessage, PrideError as PrideError
from ._delivery import (
    BranchClosed as BranchClosed,
    BranchNotRunning as BranchNotRunning,
    EnvelopeReplayed as EnvelopeReplayed,
    HostLost as HostLost,
    MailboxFull as MailboxFull,
    ReentrancyError as ReentrancyError,
    RemoteError as RemoteError,
    ReplyConsumedError as ReplyConsumedError,
    UnknownBranch as UnknownBranch,
)
from ._durable import (
    ApprovalPending as ApprovalPending,
    ApprovalRequired as ApprovalRequired,
    Defer as Defer,
    JournalMismatch as JournalMismatch,
    StoreError as StoreError,
    StoreLocked as StoreLocked,
    TurnAbandoned as TurnAbandoned,
    UnknownPendingCall as UnknownPendingCall,
    UnknownTurn as UnknownTurn,
)
from ._provider import (
    AuthenticationFailed as AuthenticationFailed,
    BadRequest as BadRequest,
    EndpointNotFound as EndpointNotFound,
    MalformedResponse as MalformedResponse,
    ProviderConnectionError as ProviderConnectionError,
    ProviderError as ProviderError,
    ProviderTimeout as ProviderTimeout,
    RateLimited as RateLimited,
    ResponseTooLarge as ResponseTooLarge,
    ScriptExhausted as ScriptExhausted,
    ServerError as ServerError,
)
from ._supervision import (
    ActivationFailed as ActivationFailed,
    FlowNodeError as FlowNodeError,
    InvalidFlow as InvalidFlow,
    MembershipError as MembershipError,
    SupervisorFailed as SupervisorFailed,
    UnknownFlow as UnknownFlow,
    UnknownOperation as UnknownOperation,
    VirtualKindError as VirtualKindError,
)
from ._turns import (
    BudgetExceeded as BudgetExceeded,
    Escalate as Escalate,
    LoopBreak as LoopBreak,
    ParseFailed as ParseFailed,
    StopStream as StopStream,
    ToolArgumentError as ToolArgumentError,
    ToolError as ToolError,
    TurnCancelled as TurnCancelled,
    TurnFinalizingError as TurnFinalizingError,
    exception_leaves as exception_leaves,
    one_exception as one_exception,
    sole_exception as sole_exception,
)

__all__ = [
    "ActivationFailed",
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
    "ReplyConsumedError",
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
    "UnknownFlow",
    "UnknownOperation",
    "UnknownPendingCall",
    "UnknownTurn",
    "VirtualKindError",
]

# Tracebacks, reprs and pickles name the public home of each class and function
# (PrideError and InvalidMessage keep theirs: they live in pride.messages).
_publish(globals(), (*__all__, "exception_leaves", "one_exception", "sole_exception"), __name__)
