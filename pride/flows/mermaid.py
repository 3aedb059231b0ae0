"""A flow as Mermaid flowchart text: the picture of a plan, or of how a run went.

```python
print(flow.to_mermaid())          # the plan
print(result.to_mermaid())        # the run: nodes coloured by outcome
```

Mermaid is text that Markdown renderers (GitHub, mkdocs-material with a
Mermaid fence) draw as a diagram, so a flow's picture lives in the docs and
in a terminal without an image library. Each node shows its name, its target
and its command (``ƒ`` for one built from upstream results); an edge with a
condition is dotted and labelled ``when``. Node ids are ``n0``, ``n1``, ...
and every label is escaped, so any node name renders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["DrawnNode", "render"]

_DIRECTIONS = frozenset({"TD", "TB", "BT", "LR", "RL"})

_STYLES: dict[str, str] = {
    "completed": "fill:#d4f7d4,stroke:#2e7d32",
    "failed": "fill:#fde0e0,stroke:#c62828",
    "skipped": "fill:#eeeeee,stroke:#9e9e9e,stroke-dasharray:4 3",
    "cancelled": "fill:#fff3cd,stroke:#f9a825",
}


class DrawnNode(Protocol):
    """What a picture shows of a node (a [`FlowNode`][pride.flows.graph.FlowNode]); this
    module sits below the graph, which draws itself with it."""

    @property
    def name(self) -> str: ...
    @property
    def target_name(self) -> str: ...
    @property
    def command(self) -> object: ...
    @property
    def late_bound(self) -> bool: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def when(self) -> object: ...
    @property
    def spawned_by(self) -> str | None: ...


def _escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label (entity codes for what Mermaid parses)."""
    return (
        text.replace("#", "#35;")  # first: the codes below start with it
        .replace("&", "#38;")
        .replace('"', "#34;")
        .replace("<", "#60;")
        .replace(">", "#62;")
        .replace("\n", " ")
    )


def _command_label(node: DrawnNode) -> str:
    return "ƒ" if node.late_bound else type(node.command).__name__


def render(
    nodes: Iterable[DrawnNode],
    *,
    direction: str = "TD",
    outcomes: Mapping[str, str] | None = None,
) -> str:
    """Mermaid ``flowchart`` text for ``nodes`` (with ``outcomes``: coloured by them).

    Raises:
        ValueError: ``direction`` is not one of TD, TB, BT, LR, RL.
    """
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction is one of {sorted(_DIRECTIONS)}, got {direction!r}")
    listed = list(nodes)
    ids = {node.name: f"n{index}" for index, node in enumerate(listed)}
    lines = [f"flowchart {direction}"]
    for node in listed:
        # The markup is ours; only the names inside it are escaped.
        label = (
            f"{_escape(node.name)}<br/><small>{_escape(node.target_name)}"
            f" · {_escape(_command_label(node))}</small>"
        )
        shape = ('(["', '"])') if node.spawned_by is not None else ('["', '"]')
        lines.append(f"    {ids[node.name]}{shape[0]}{label}{shape[1]}")
    for node in listed:
        for dependency in node.depends_on:
            if dependency not in ids:
                continue  # a dangling name: the flow will refuse to start; draw what exists
            arrow = " -. when .-> " if node.when is not None else " --> "
            lines.append(f"    {ids[dependency]}{arrow}{ids[node.name]}")
        spawner = node.spawned_by
        if spawner is not None and spawner in ids and spawner not in node.depends_on:
            lines.append(f"    {ids[spawner]} -. spawned .-> {ids[node.name]}")
    if outcomes:
        used = sorted({outcome for outcome in outcomes.values()})
        for outcome in used:
            lines.append(f"    classDef {outcome} {_STYLES[outcome]}")
        for outcome in used:
            members = [
                ids[name] for name, got in outcomes.items() if got == outcome and name in ids
            ]
            if members:
                lines.append(f"    class {','.join(members)} {outcome}")
    return "\n".join(lines) + "\n"
