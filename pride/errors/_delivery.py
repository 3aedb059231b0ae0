"""Reaching a branch: a target that is not running, closed, full, lost or unknown."""

from __future__ import annotations

from uuid import UUID

from ..messages import PrideError

__all__ = [
    "BranchClosed",
    "BranchNotRunning",
    "EnvelopeReplayed",
    "HostLost",
    "MailboxFull",
    "ReentrancyError",
    "RemoteError",
    "ReplyConsumedError",
    "UnknownBranch",
]


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
            f"mailbox of branch {branch_name!r} is full (capacity {capacity}); "
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


class UnknownBranch(PrideError, LookupError):
    """No branch with that name or id is known where it was looked up."""

    def __init__(self, ref: str | UUID, where: str = "") -> None:
        self.ref = ref
        super().__init__(f"no branch {str(ref)!r}" + (f" in {where}" if where else ""))
