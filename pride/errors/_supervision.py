"""Sessions and flows: operations, membership, restart intensity, graphs of work."""

from __future__ import annotations

from uuid import UUID

from ..messages import PrideError

__all__ = [
    "ActivationFailed",
    "FlowNodeError",
    "InvalidFlow",
    "MembershipError",
    "SupervisorFailed",
    "UnknownFlow",
    "UnknownOperation",
    "VirtualKindError",
]


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


class VirtualKindError(PrideError, ValueError):
    """A kind of virtual branches cannot be registered: the session has no store,
    the kind's name is taken or malformed, or an option is out of range. The
    message says how to fix it."""


class ActivationFailed(PrideError):
    """A virtual branch could not be activated: its factory raised (or returned
    something that is not an unstarted Branch), or its stored state could not
    be read. ``__cause__`` is the underlying error.

    Every caller waiting on that activation gets it; nothing is kept, so the
    next message to the name tries again.

    Attributes:
        branch_name: the virtual branch's name (``kind/key``).
        reason: what went wrong, in a sentence.
    """

    def __init__(self, branch_name: str, reason: str) -> None:
        self.branch_name = branch_name
        self.reason = reason
        super().__init__(f"virtual branch {branch_name!r} could not be activated: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (ActivationFailed, (self.branch_name, self.reason))


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


class UnknownFlow(PrideError, LookupError):
    """``resume_flow`` for a flow id the session's store holds no unfinished flow of.

    Attributes:
        flow_id: the id looked up.
    """

    def __init__(self, flow_id: UUID | str, where: str = "") -> None:
        self.flow_id = flow_id
        super().__init__(
            f"no unfinished flow {flow_id}"
            + (f" in {where}" if where else "")
            + " (it may have finished already; session.unfinished_flows() lists the others)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.flow_id,))
