"""Issue 36, item 4: a turn resumed from its journal counts each real call once.

A resumed turn (approved after it stopped, or restored after a crash) answers the
steps its journal holds without calling anything. Those calls were counted when they
ran; the turn's own usage (``RunEnd.usage``, its budget) holds the whole turn, and
``branch.usage``, ``session.usage`` and a session's budget count each real call once.

The model is the real loopback server, reporting a cost for every reply; the journal
lives in a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pride
from pride import (
    ApprovalRequired,
    Approve,
    Branch,
    Budget,
    Operate,
    RunEnd,
    Session,
    iModel,
)
from pride.llm import RetryPolicy, ScriptedReply, ToolCall, Usage as CallUsage
from pride.messages import to_json
from pride.store import BranchStore
from pride.testing import openai_server

LOOKUP = ToolCall("lookup", {"name": "bob"}, id="call_lookup")
EMAIL = ToolCall("send_email", {"to": "bob"}, id="call_email")


def _priced(item: Any) -> ScriptedReply:
    """A reply of 10 tokens in, 5 out, one cent."""
    reply = ScriptedReply.from_item(item)
    return ScriptedReply(
        reply.text, reply.tool_calls, CallUsage(10, 5, cached_tokens=0, cost_usd=0.01)
    )


def _model(server: Any) -> iModel:
    return iModel(
        "openai/gpt-test",
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_retries=0),
    )


def _tools(ran: list[str]) -> list[pride.Tool]:
    def lookup(name: str) -> str:
        """Look someone up."""
        ran.append(f"lookup {name}")
        return f"{name}@example.org"

    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(f"email {to}")
        return f"sent to {to}"

    return [pride.Tool(lookup, idempotent=True), pride.Tool(send_email, requires_approval=True)]


@pytest.fixture(params=["memory", "store"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "store.db" if request.param == "store" else None


def _figures(usage: pride.Usage) -> tuple[int, int, int, int, float]:
    return (
        usage.model_calls,
        usage.tool_calls,
        usage.input_tokens,
        usage.output_tokens,
        round(usage.cost_usd or 0.0, 6),
    )


async def test_issue36_an_approved_turn_counts_each_real_call_once(store: Path | None) -> None:
    """Two model calls and two tool calls really made, one cent a reply: so say
    branch.usage, session.usage and the resumed turn's RunEnd, and a session budget
    of exactly two model calls lets the turn finish."""
    ran: list[str] = []
    ends: list[RunEnd] = []
    script = [_priced([LOOKUP, EMAIL]), _priced("emailed bob")]
    async with openai_server(script) as server:
        budget = Budget(max_model_calls=2, max_tool_calls=2)
        async with Session(store=store, budget=budget) as session:
            session.observe(RunEnd, handler=ends.append)
            branch = await session.spawn(
                Branch(name="mailer", chat_model=_model(server), tools=_tools(ran))
            )
            with pytest.raises(ApprovalRequired) as info:
                await branch.operate("email bob", actions=True)
            assert _figures(branch.usage) == (1, 1, 10, 5, 0.01)
            result = await session.resolve(info.value.turn_id, {"call_email": Approve()})
            assert result.output == "emailed bob"
            real = (2, 2, 20, 10, 0.02)
            assert _figures(branch.usage) == real
            assert _figures(session.usage) == real
    assert ran == ["lookup bob", "email bob"]
    assert server.request_count == 2
    [end] = ends
    assert _figures(end.usage) == real  # the whole turn, its replayed steps included


async def test_issue36_a_turn_restored_after_a_crash_counts_only_what_runs_again(
    tmp_path: Path,
) -> None:
    """A journal as a crashed process leaves it (one model step done, costing a
    cent): the restored turn answers that step from the journal and makes one live
    call; this process counted one real model call, the turn two."""
    from pride.durable.records import StepRecord
    from pride.llm import ModelResponse

    path = tmp_path / "store.db"
    ran: list[str] = []
    planned = StepRecord(
        "model",
        ModelResponse(
            "", (LOOKUP,), CallUsage(10, 5, cached_tokens=0, cost_usd=0.01), "gpt-test", "openai"
        ),
    )
    async with openai_server([_priced("found bob")]) as server:
        async with BranchStore(path) as writer:
            await writer.save(Branch(name="mailer", chat_model=_model(server), tools=_tools(ran)))
            turn_id = str(pride.messages._ids.new_id())
            writer.journal_begin("mailer", turn_id, to_json(Operate("find bob", actions=True)))
            writer.journal_step("mailer", turn_id, 0, planned.to_text())
            await writer.flush()
        ends: list[RunEnd] = []
        async with Session(store=path, budget=Budget(max_model_calls=1)) as session:
            session.observe(RunEnd, handler=ends.append)
            resumed: list[Any] = []
            session.on_resume(resumed.append)
            branch = await session.spawn(
                Branch(name="mailer", chat_model=_model(server), tools=_tools(ran))
            )
            [reply] = resumed
            await reply.result()
            assert _figures(branch.usage) == (1, 1, 10, 5, 0.01)
            assert _figures(session.usage) == (1, 1, 10, 5, 0.01)
    assert server.request_count == 1
    [end] = ends
    assert _figures(end.usage) == (2, 1, 20, 10, 0.02)


def _kinds(end: RunEnd) -> tuple[int, int, int, int]:
    return (end.input_tokens, end.cached_tokens, end.cache_write_tokens, end.reasoning_tokens)


def _kinds_model(provider: str, server: Any) -> iModel:
    return iModel(
        f"{provider}/model-test",
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_retries=0),
    )


# Anthropic reports cache reads and writes (its output_tokens include any thinking, never
# split out); OpenAI reports cache reads and reasoning tokens (it has no cache writes).
_KINDS = {
    "anthropic": CallUsage(100, 10, cached_tokens=30, cost_usd=None, cache_write_tokens=50),
    "openai": CallUsage(100, 10, cached_tokens=30, cost_usd=None, reasoning_tokens=7),
}


@pytest.mark.parametrize("provider", sorted(_KINDS))
async def test_issue33_a_turn_resumed_from_its_journal_keeps_every_kind_of_token(
    provider: str, tmp_path: Path
) -> None:
    """Cache reads, cache writes and reasoning tokens of the journaled first call are in the
    resumed turn's RunEnd: the journal (a real SQLite store) keeps every kind of usage."""
    usage = _KINDS[provider]
    ran: list[str] = []
    ends: list[RunEnd] = []
    script = [
        ScriptedReply(tool_calls=(LOOKUP, EMAIL), usage=usage),
        ScriptedReply("emailed bob", usage=usage),
    ]
    path = tmp_path / "store.db"
    async with openai_server(script) as server:

        def mailer() -> Branch:
            return Branch(
                name="mailer", chat_model=_kinds_model(provider, server), tools=_tools(ran)
            )

        async with Session(store=path) as session:
            branch = await session.spawn(mailer())
            with pytest.raises(ApprovalRequired) as info:
                await branch.operate("email bob", actions=True)
        # A new session (as after a restart) has only the store's journal to resume from.
        async with Session(store=path) as session:
            session.observe(RunEnd, handler=ends.append)
            await session.spawn(mailer())
            await session.resolve(info.value.turn_id, {"call_email": Approve()})
    assert server.request_count == 2  # the first reply came from the journal
    [end] = ends
    assert _kinds(end) == (
        2 * usage.input_tokens,
        2 * usage.cached_tokens,
        2 * usage.cache_write_tokens,
        2 * usage.reasoning_tokens,
    )
    assert end.cache_write_tokens or end.reasoning_tokens  # each provider tests a kind
