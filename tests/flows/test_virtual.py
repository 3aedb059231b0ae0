"""Flow nodes on virtual branches: a node addresses the branch by its name, so
passivation between the flow's start and the node's send does not close it; two
nodes on one virtual branch keep their send order."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from pride import Branch, Call, Chat, Flow, InvalidFlow, NodeStarted, Session, Signal
from tests.helpers import echo_model


def doc_branch(key: str) -> Branch:
    return Branch(chat_model=echo_model())


async def test_a_node_on_a_virtual_branch_passivated_before_its_send_activates_it(
    tmp_path: Path,
) -> None:
    """doc/1 is live when the flow starts and passivated before its second node is sent:
    the node activates it again, as a send by name does, instead of failing with
    BranchClosed on the branch object the flow had resolved."""
    async with Session(store=tmp_path / "store.db") as session:
        await session.virtual("doc", doc_branch)
        await session.spawn(Branch(name="other", chat_model=echo_model()))

        async def passivate(branch: Branch) -> bool:
            return await session.passivate("doc/1")

        session.register_operation("passivate", passivate)
        await session.ask("doc/1", Chat("hello"))  # live now
        flow = Flow("passivated")
        flow.add("doc/1", Chat("first"), name="first")
        flow.add("other", Call("passivate"), depends_on="first", name="passivate")
        flow.add("doc/1", Chat("second"), depends_on="passivate", name="second")
        result = await session.flow(flow)
    assert result["passivate"] is True
    assert result.outcomes == {
        "first": "completed",
        "passivate": "completed",
        "second": "completed",
    }
    assert result["second"] == "re: second"


async def test_nodes_on_one_virtual_branch_are_sent_in_the_order_they_started(
    tmp_path: Path,
) -> None:
    """Two nodes on doc/1, not live when the flow starts, the first one's command built
    only once the second has gone as far as it can: the second waits for the first
    one's send, as on any other branch."""
    async with Session(store=tmp_path / "store.db") as session:
        await session.virtual("doc", doc_branch)
        started: list[Signal] = []
        session.observe(NodeStarted, handler=started.append)

        async def slowly(upstream: object) -> Chat:
            await trio.testing.wait_all_tasks_blocked()  # the second node runs ahead if it can
            return Chat("first")

        flow = Flow("ordered")
        flow.add("doc/1", slowly, name="first")
        flow.add("doc/1", Chat("second"), name="second")
        result = await session.flow(flow)
    assert result.ok
    assert [signal.node for signal in started] == ["first", "second"]  # type: ignore[attr-defined]


async def test_a_node_on_the_virtual_branch_whose_turn_starts_the_flow_is_refused(
    tmp_path: Path,
) -> None:
    """A virtual branch's turn starting a flow with a node on its own name: InvalidFlow
    before anything runs (the name resolves to the branch's address, which is the same
    branch), as for any other branch."""
    async with Session(store=tmp_path / "store.db") as session:
        await session.virtual("doc", doc_branch)

        async def start(branch: Branch) -> str:
            flow = Flow()
            flow.add("doc/1", Chat("inside"), name="inside")
            with pytest.raises(InvalidFlow, match="would wait on itself"):
                await session.flow(flow)
            return "refused"

        session.register_operation("start", start)
        assert await session.ask("doc/1", Call("start")) == "refused"


async def test_a_node_naming_a_live_virtual_branch_by_its_object_shares_its_send_order(
    tmp_path: Path,
) -> None:
    """Two nodes on doc/1, the first given the live Branch object and the second its
    name: the object resolved to itself and the name to the branch's `VirtualRef`, two
    send orders for one branch, so the second was sent before the first. Both are the
    branch's address now: the second waits for the first one's send, and the first
    one's send reaches the branch even once it was passivated."""
    async with Session(store=tmp_path / "store.db") as session:
        await session.virtual("doc", doc_branch)
        await session.ask("doc/1", Chat("hello"))  # live now
        live = session.get_branch("doc/1")
        started: list[Signal] = []
        session.observe(NodeStarted, handler=started.append)

        async def slowly(upstream: object) -> Chat:
            await trio.testing.wait_all_tasks_blocked()  # the second node runs ahead if it can
            assert await session.passivate("doc/1")  # the object the flow was given stops
            return Chat("first")

        flow = Flow("ordered")
        flow.add(live, slowly, name="first")
        flow.add("doc/1", Chat("second"), name="second")
        result = await session.flow(flow)
    assert result.ok, result.errors
    assert [signal.node for signal in started] == ["first", "second"]  # type: ignore[attr-defined]
    assert result["first"] == "re: first"
