"""Flow nodes on virtual branches: two nodes on one virtual branch keep their send order."""

from __future__ import annotations

from pathlib import Path

import trio

from pride import Branch, Chat, Flow, NodeStarted, Session, Signal
from tests.helpers import echo_model


def doc_branch(key: str) -> Branch:
    return Branch(chat_model=echo_model())


async def test_nodes_on_one_virtual_branch_are_sent_in_the_order_they_started(
    tmp_path: Path,
) -> None:
    """Two nodes on doc/1, not live when the flow starts, the first one's command built
    slowly: the second waits for the first one's send, as on any other branch."""
    async with Session(store=tmp_path / "store.db") as session:
        await session.virtual("doc", doc_branch)
        started: list[Signal] = []
        session.observe(NodeStarted, handler=started.append)

        async def slowly(upstream: object) -> Chat:
            await trio.sleep(0.01)
            return Chat("first")

        flow = Flow("ordered")
        flow.add("doc/1", slowly, name="first")
        flow.add("doc/1", Chat("second"), name="second")
        result = await session.flow(flow)
    assert result.ok
    assert [signal.node for signal in started] == ["first", "second"]  # type: ignore[attr-defined]
