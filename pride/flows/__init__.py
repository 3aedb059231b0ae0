"""Flows: dependency-aware graphs of work across branches, run as ordinary turns.

```python
flow = pride.Flow("brief")
facts = flow.add("researcher", Chat("find the facts"))
flow.add("writer", lambda up: Chat(f"write it from: {up['researcher']}"), depends_on=facts)
result = await session.flow(flow, max_concurrent=5)
print(result["writer"], result.outcomes)
```

`pride.flows.graph` builds the plan, `pride.flows.run` runs it (each
node a command sent to its branch through the public send API, by
`pride.flows.node`), `pride.flows.growing` lets its nodes' work add
nodes, `pride.flows.stream` streams its events, `pride.flows.journal`
journals a run in a store so that `pride.flows.resume` can continue it
after a crash, `pride.flows.mermaid` draws it.
Sessions run flows ([`Session.flow`][pride.supervisors.session.Session.flow],
[`Session.flow_stream`][pride.supervisors.session.Session.flow_stream]); this package knows no
Session class: a session hands a run its name resolution and observer as a
`FlowHost`.
"""

from .graph import CommandSource, Condition, Flow, FlowNode, Outcome
from .growing import current_flow
from .journal import UnfinishedFlow
from .mermaid import render as render_mermaid
from .result import FlowResult, NodeOutcome
from .run import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_SPAWN, FlowRun
from .state import FlowHost
from .stream import ITEM_BUFFER, FlowEvents, NodeItem, open_flow_stream

__all__ = [
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_SPAWN",
    "ITEM_BUFFER",
    "CommandSource",
    "Condition",
    "Flow",
    "FlowEvents",
    "FlowHost",
    "FlowNode",
    "FlowResult",
    "FlowRun",
    "NodeItem",
    "NodeOutcome",
    "Outcome",
    "UnfinishedFlow",
    "current_flow",
    "open_flow_stream",
    "render_mermaid",
]
