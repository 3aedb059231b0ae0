"""The flow builder: nodes (a command for a branch) and the dependencies between them.

```python
flow = pride.Flow("brief")
research = flow.add("researcher", Chat("find the facts"))
draft = flow.add("writer", lambda up: Chat(f"draft from: {up['researcher']}"),
                 depends_on=research)
flow.add("critic", lambda up: Chat(f"review: {up['writer']}"), depends_on=draft,
         when=lambda up: len(up["writer"]) > 0)
result = await session.flow(flow)
```

A `Flow` is a plan, not a run: it holds nodes and checks what it can
on its own (types, duplicate names, and at `check` time dependencies that
name no node, and cycles). Targets are resolved by the session that runs it,
so an unknown branch is refused when the flow starts, before any node runs
(see `pride.flows.run`). One plan can be run many times, by several
sessions; nodes a running flow grows go to that run, not to the plan.

Dependencies are explicit: a node added with no ``depends_on`` is a root and
starts at once. (The reference's ``depends_on=None`` meant "after the last
node", which chained fan-outs one after another: lionagi #2645.)
"""

from __future__ import annotations

import collections
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Literal
from uuid import UUID

import attrs

from ..actors import BranchRef
from ..actors.target import is_target
from ..branch import Branch
from ..errors import InvalidFlow
from ..messages import WorkCommand
from .mermaid import render

__all__ = [
    "CommandSource",
    "Condition",
    "Flow",
    "FlowNode",
    "Outcome",
    "check_command_source",
    "check_condition",
    "check_target",
    "order_nodes",
    "target_label",
]

Outcome = Literal["completed", "failed", "skipped", "cancelled"]
"""How a node ended: it ran to a result, raised, never started, or was cancelled."""

CommandSource = WorkCommand | Callable[[Mapping[str, Any]], WorkCommand | Awaitable[WorkCommand]]
"""A work command, or a function of the upstream results (sync or async) returning one."""

Condition = Callable[[Mapping[str, Any]], bool | Awaitable[bool]]
"""A predicate on the upstream results (sync or async): false skips the node."""


@attrs.frozen(eq=False, repr=False)
class FlowNode:
    """One node of a flow: a command for a target, after its dependencies.

    Made by [`Flow.add`][pride.flows.graph.Flow.add] (or a running flow's ``add``); pass
    it (or its name) to ``depends_on`` of later nodes.

    Attributes:
        name: unique in its flow.
        target: what the command is sent to: a Branch, a name, an id, a
            BranchRef or another [`Target`][pride.Target].
        command: a work command, or a function of the upstream results
            returning one.
        depends_on: the names of the nodes it waits for.
        when: a predicate on the upstream results; false skips the node.
        spawned_by: the node whose work added this one to a running flow.
    """

    name: str
    target: Any
    command: CommandSource
    depends_on: tuple[str, ...] = ()
    when: Condition | None = None
    spawned_by: str | None = None

    @property
    def late_bound(self) -> bool:
        """True when the command is built from the upstream results."""
        return not isinstance(self.command, WorkCommand)

    @property
    def target_name(self) -> str:
        """A short human name for the target (its name, or the start of its id)."""
        return target_label(self.target)

    def __repr__(self) -> str:
        after = f" after {', '.join(self.depends_on)}" if self.depends_on else ""
        return f"<FlowNode {self.name!r} -> {self.target_name}{after}>"


def target_label(target: Any) -> str:
    """A short human name for a node's target."""
    if isinstance(target, str):
        return target
    if isinstance(target, UUID):
        return str(target)[:8]
    name = getattr(target, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(target, BranchRef):
        return str(target.id)[:8]
    return "node"


def check_target(target: Any) -> Any:
    """``target`` if a node can be sent to it; else TypeError."""
    if isinstance(target, Branch | BranchRef | str | UUID) or is_target(target):
        if isinstance(target, str) and not target:
            raise ValueError("a node's target name must not be empty")
        return target
    raise TypeError(
        "a node's target is a Branch (or another pride.Target), a BranchRef, a branch name "
        f"or an id, got {type(target).__name__}"
    )


def check_command_source(command: Any) -> CommandSource:
    """``command`` if it is a work command or a callable; else TypeError."""
    if isinstance(command, WorkCommand):
        return command
    if callable(command) and not isinstance(command, type):
        return command  # type: ignore[no-any-return]
    if hasattr(command, "lane"):  # a command, but not for the work lane
        raise TypeError(
            f"a node runs a work command (Chat, Run, Call, ...), not {type(command).__name__}"
        )
    raise TypeError(
        "a node's command is a work command or a function of the upstream results "
        f"returning one, got {type(command).__name__}"
    )


def check_condition(when: Any) -> Condition | None:
    """``when`` if it is None or callable; else TypeError."""
    if when is None or (callable(when) and not isinstance(when, type)):
        return when
    raise TypeError(f"when is a predicate on the upstream results, got {type(when).__name__}")


def check_name(name: Any) -> str | None:
    """``name`` if it is None or a non-empty str; else TypeError/ValueError."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"a node's name is a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError("a node's name must not be empty")
    return name


def dependency_names(depends_on: Any) -> list[str | FlowNode]:
    """The items of ``depends_on``: one node or name, or an iterable of them."""
    if isinstance(depends_on, str | FlowNode):
        return [depends_on]
    if depends_on is None:
        return []
    if not isinstance(depends_on, Iterable):
        raise TypeError(
            "depends_on is a node, a node's name, or an iterable of them, "
            f"got {type(depends_on).__name__}"
        )
    items = list(depends_on)
    for item in items:
        if not isinstance(item, str | FlowNode):
            raise TypeError(f"depends_on holds nodes or names, got {type(item).__name__}")
    return items


def unique_name(label: str, taken: Mapping[str, Any], suffixes: dict[str, int]) -> str:
    """``label``, or ``label-2``, ``label-3``, ... whichever is free first.

    ``suffixes`` remembers, per label, the first suffix not tried yet (names are
    never taken back), so N nodes on one target cost N lookups, not N squared."""
    if label not in taken:
        return label
    index = suffixes.get(label, 2)
    while f"{label}-{index}" in taken:
        index += 1
    suffixes[label] = index + 1
    return f"{label}-{index}"


class Flow:
    """A graph of work for branches: nodes and the dependencies between them.

    ```python
    flow = Flow("review")
    a = flow.add("writer", Chat("draft it"))
    flow.add("critic", lambda up: Chat(f"review: {up['writer']}"), depends_on=a)
    result = await session.flow(flow)
    ```

    Args:
        name: a human name, carried by the node signals and the result.

    A flow is a plan: building one runs nothing. It is run by
    [`Session.flow`][pride.supervisors.session.Session.flow] (or streamed by ``flow_stream``),
    any number of times.
    """

    def __init__(self, name: str | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"a flow's name is a str or None, got {type(name).__name__}")
        self.name = name
        self._nodes: dict[str, FlowNode] = {}
        self._suffixes: dict[str, int] = {}  # see unique_name

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Flow{label} {len(self._nodes)} nodes>"

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[FlowNode]:
        return iter(tuple(self._nodes.values()))

    def __contains__(self, name: object) -> bool:
        if isinstance(name, FlowNode):
            return self._nodes.get(name.name) is name
        return name in self._nodes

    def __getitem__(self, name: str) -> FlowNode:
        """The node called ``name`` (KeyError if none)."""
        return self._nodes[name]

    @property
    def nodes(self) -> tuple[FlowNode, ...]:
        """The nodes, in the order they were added."""
        return tuple(self._nodes.values())

    def add(
        self,
        target: Any,
        command: CommandSource,
        *,
        depends_on: FlowNode | str | Iterable[FlowNode | str] = (),
        when: Condition | None = None,
        name: str | None = None,
    ) -> FlowNode:
        """Add a node: ``command`` for ``target``, once ``depends_on`` have completed.

        Args:
            target: a Branch (or another [`Target`][pride.Target]), a
                BranchRef, or a branch name or id (resolved by the session
                that runs the flow).
            command: a work command, or a function (sync or async) of the
                upstream results returning one. The upstream results map the
                name of every node this one depends on, directly or through
                others, to its result.
            depends_on: the nodes (or their names) that must complete first;
                a name may refer to a node added later. Empty: a root.
            when: a predicate (sync or async) on the upstream results,
                checked when the dependencies have completed; false skips
                the node (and so its dependents).
            name: unique in the flow; default: the target's name, made
                unique with ``-2``, ``-3``, ...

        Returns:
            The node's handle, for ``depends_on`` of later nodes.

        Raises:
            TypeError: a target, command, condition or dependency of the wrong kind.
            ValueError: an empty name.
            InvalidFlow: the name is taken, or a dependency is a node of
                another flow, or the node itself.
        """
        node = make_node(
            self._nodes,
            target,
            command,
            depends_on=depends_on,
            when=when,
            name=name,
            flow=self.name,
            suffixes=self._suffixes,
        )
        self._nodes[node.name] = node
        return node

    def check(self) -> None:
        """Refuse a plan that cannot run: a dependency on a node the flow does
        not have, or a cycle. (Targets are checked by the session that runs it.)

        Raises:
            InvalidFlow: naming the first offending node.
        """
        order_nodes(self._nodes, flow=self.name)

    def to_mermaid(self, *, direction: str = "TD") -> str:
        """The graph as Mermaid flowchart text (see `pride.flows.mermaid`)."""
        return render(self.nodes, direction=direction)


def make_node(
    taken: Mapping[str, FlowNode],
    target: Any,
    command: Any,
    *,
    depends_on: Any,
    when: Any,
    name: Any,
    flow: str | None,
    spawned_by: str | None = None,
    suffixes: dict[str, int] | None = None,
) -> FlowNode:
    """A checked node for a flow whose nodes so far are ``taken`` (not added to it)."""
    check_target(target)
    source = check_command_source(command)
    condition = check_condition(when)
    given = check_name(name)
    label = (
        given
        if given is not None
        else unique_name(target_label(target), taken, suffixes if suffixes is not None else {})
    )
    if given is not None and given in taken:
        raise InvalidFlow(given, "another node of the flow has this name", flow=flow)
    names: list[str] = []
    for item in dependency_names(depends_on):
        if isinstance(item, FlowNode) and taken.get(item.name) is not item:
            raise InvalidFlow(
                label,
                f"depends on {item.name!r}, a node of another flow (pass its name, or "
                "a handle this flow returned)",
                flow=flow,
            )
        dependency = item.name if isinstance(item, FlowNode) else item
        if dependency == label:
            raise InvalidFlow(label, "depends on itself", flow=flow)
        if dependency not in names:
            names.append(dependency)
    return FlowNode(label, target, source, tuple(names), condition, spawned_by)


def order_nodes(nodes: Mapping[str, FlowNode], *, flow: str | None = None) -> list[FlowNode]:
    """``nodes`` in an order where each comes after its dependencies (ties: as added).

    Raises:
        InvalidFlow: a dependency names no node, or the nodes form a cycle
            (the message walks it: ``a -> b -> a``).
    """
    for node in nodes.values():
        for dependency in node.depends_on:
            if dependency not in nodes:
                raise InvalidFlow(
                    node.name,
                    f"depends on {dependency!r}, which is not a node of the flow",
                    flow=flow,
                )
    waiting = {name: len(node.depends_on) for name, node in nodes.items()}
    dependents: dict[str, list[str]] = {name: [] for name in nodes}
    for node in nodes.values():
        for dependency in node.depends_on:
            dependents[dependency].append(node.name)
    ready = collections.deque(name for name, count in waiting.items() if count == 0)
    ordered: list[FlowNode] = []
    while ready:
        name = ready.popleft()
        ordered.append(nodes[name])
        for dependent in dependents[name]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    if len(ordered) < len(nodes):
        stuck = {name for name, count in waiting.items() if count > 0}
        cycle = _find_cycle(nodes, stuck)
        raise InvalidFlow(cycle[0], f"is on a cycle: {' -> '.join(cycle)}", flow=flow)
    return ordered


def _find_cycle(nodes: Mapping[str, FlowNode], stuck: set[str]) -> list[str]:
    """A cycle among the ``stuck`` nodes (those that never became ready), closed:
    its first name is also its last, and it runs the way work would flow."""
    # Every stuck node waits on at least one stuck node (else it would have become
    # ready), so following stuck dependencies must come back to a node seen before.
    order = {name: index for index, name in enumerate(nodes)}
    name = min(stuck, key=order.__getitem__)
    path: list[str] = []
    seen: dict[str, int] = {}
    while name not in seen:
        seen[name] = len(path)
        path.append(name)
        name = next(dependency for dependency in nodes[name].depends_on if dependency in stuck)
    cycle = path[seen[name] :]
    cycle.reverse()  # dependency first
    first = min(range(len(cycle)), key=lambda index: order[cycle[index]])
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


async def call_maybe_async(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, awaited when it returns an awaitable."""
    value = function(*args)
    if inspect.isawaitable(value):
        value = await value
    return value
