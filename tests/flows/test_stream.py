"""``Session.flow_stream``: node signals as they happen, the same as the observer's; the
nodes' streamed items on request; leaving early cancels the flow."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import (
    AssistantResponse,
    Branch,
    Chat,
    Flow,
    Instruction,
    NodeCompleted,
    NodeSignal,
    NodeStarted,
    Reasoning,
    ReasoningDelta,
    Run,
    ScriptedModel,
    Session,
    Signal,
)
from pride.flows import NodeItem
from pride.llm import ScriptedReply
from tests.flows.support import balanced_turns, node_events, team, work


async def test_the_stream_yields_what_the_observer_sees_in_the_same_order() -> None:
    """Every node signal, in order, then the result."""
    async with team("a", "b", "c") as (session, _):
        observed: list[Signal] = []
        session.observe(NodeSignal, handler=observed.append)
        flow = Flow("streamed")
        flow.add("a", Chat("one"), name="one")
        flow.add("b", Chat("two"), name="two")
        flow.add("c", lambda up: Chat(f"{up['one']} {up['two']}"), depends_on=["one", "two"])
        streamed: list[Signal] = []
        async with session.flow_stream(flow) as events:
            assert events.result is None
            async for event in events:
                streamed.append(event)
        assert events.result is not None and events.result.ok
    assert streamed == observed
    kinds = node_events(streamed)
    assert kinds[-2:] == [("NodeStarted", "c"), ("NodeCompleted", "c")]
    assert len(kinds) == 6
    assert events.result["c"] == "re: re: one re: two"


async def test_leaving_the_block_early_cancels_the_flow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """break after the first start: the running node is cancelled (its turn finalised), the
    rest skipped; the outcomes are in events.result."""
    async with team("a", "b") as (session, overlap):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow()
        flow.add("a", work("long", 10), name="long")
        flow.add("b", work("after", 1), depends_on="long", name="after")
        start = trio.current_time()
        async with session.flow_stream(flow) as events:
            async for event in events:
                assert isinstance(event, NodeStarted)
                break
        elapsed = trio.current_time() - start
        assert balanced_turns(recorded)
    assert elapsed < 1
    assert events.result is not None
    assert events.result.outcomes == {"long": "cancelled", "after": "skipped"}
    assert overlap.finished == []


async def test_an_error_in_the_block_propagates_as_itself() -> None:
    """An exception raised by the consumer leaves as that exception, not a group."""
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", work("x", 0))
        with pytest.raises(KeyError, match="consumer"):
            async with session.flow_stream(flow) as events:
                async for _ in events:
                    raise KeyError("consumer")


async def test_items_of_streaming_nodes_come_with_the_signals() -> None:
    """items=True: a Run node's messages arrive as NodeItems between its start and its end;
    its result is the list of them; a Chat node is a plain node."""
    async with team("a", "b") as (session, _):
        flow = Flow()
        flow.add("a", Run("tell me"), name="story")
        flow.add("b", Chat("plain"), name="plain", depends_on="story")
        events_seen: list[object] = []
        async with session.flow_stream(flow, items=True) as events:
            async for event in events:
                events_seen.append(event)
    result = events.result
    assert result is not None and result.ok
    story_items = [e.item for e in events_seen if isinstance(e, NodeItem) and e.node == "story"]
    assert [type(i) for i in story_items] == [Instruction, str, str, AssistantResponse]
    assert "".join(story_items[1:3]) == "re: tell me"  # the reply's text, as it streamed
    assert result["story"] == [story_items[0], story_items[-1]]  # what ask would return
    assert result["plain"] == "re: plain"
    positions = {(type(e).__name__, getattr(e, "node", None)): i for i, e in enumerate(events_seen)}
    first_item = next(i for i, e in enumerate(events_seen) if isinstance(e, NodeItem))
    assert positions[("NodeStarted", "story")] < first_item < positions[("NodeCompleted", "story")]


async def test_without_items_a_run_node_returns_its_messages_unstreamed() -> None:
    """items=False (the default): no NodeItem; a Run node's result is the same list."""
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Run("tell me"), name="story")
        async with session.flow_stream(flow) as events:
            seen = [event async for event in events]
    assert not any(isinstance(e, NodeItem) for e in seen)
    assert events.result is not None
    assert [type(m) for m in events.result["story"]] == [Instruction, AssistantResponse]


async def test_a_thinking_run_nodes_result_leaves_its_reasoning_chunks_out() -> None:
    """A Run node's result is what ask returns: Reasoning messages in, ReasoningDelta out."""
    model = ScriptedModel([ScriptedReply("done", thinking="Pondering it.")] * 2)
    async with Session() as session:
        branch = await session.spawn(Branch(name="a", chat_model=model))
        flow = Flow()
        flow.add("a", Run("think"), name="story")
        async with session.flow_stream(flow, items=True) as events:
            items = [e.item async for e in events if isinstance(e, NodeItem)]
        asked = await pride.ask(branch, Run("think"))
    assert any(isinstance(item, ReasoningDelta) for item in items)
    assert events.result is not None
    kinds = [type(m) for m in events.result["story"]]
    assert kinds == [type(m) for m in asked] == [Instruction, Reasoning, AssistantResponse]


async def test_a_slow_consumer_holds_streaming_turns_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Items wait for the consumer (a small buffer): a consumer that stops reading stops
    the streaming turn, which ends cleanly when the block is left."""
    async with team("a") as (session, _):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow()
        flow.add("a", Run("tell me a long story " * 10), name="story")  # many token chunks
        async with session.flow_stream(flow, items=True) as events:
            first = await events.__anext__()
            assert isinstance(first, NodeStarted)
            await trio.sleep(5)  # not reading
            assert not any(isinstance(s, NodeCompleted) for s in recorded)
        assert balanced_turns(recorded)
    assert events.result is not None


async def test_a_node_the_consumer_adds_after_the_last_node_ended_runs_or_is_refused() -> None:
    """Growing the run from the consumer's side once its last node has ended: the node
    runs, or ``add`` raises RuntimeError (the run is finishing); never accepted and then
    left without an outcome, failing the whole run with RuntimeError.

    Which of the two depends on whether the scheduler saw the run empty before the
    consumer's ``add`` (trio's scheduling order, random: about half the time), hence
    the rounds."""
    async with team("a") as (session, _):
        for _ in range(40):
            flow = Flow()
            flow.add("a", Chat("one"), name="one")
            added = False
            async with session.flow_stream(flow) as events:
                async for event in events:
                    if isinstance(event, NodeCompleted) and event.node == "one":
                        try:
                            events.run.add("a", Chat("two"), name="two")
                        except RuntimeError as exc:
                            assert "finished" in str(exc)
                        else:
                            added = True
            assert events.result is not None
            expected = {"one": "completed", "two": "completed"} if added else {"one": "completed"}
            assert events.result.outcomes == expected
