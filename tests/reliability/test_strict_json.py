"""Issue 36, item 3: everything pride writes is strict JSON, whatever numbers it is handed.

A tool's output, a model's reply text and an application's own model may all hold
``NaN`` or ``Infinity``; Python's ``json`` writes them, though no JSON reader has to
accept them. Each writer is driven through real parts (the loopback provider, a real
store, real files) and what it wrote is read back with pride's strict reader.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pride
from pride import Branch, Operate, ScriptedModel, Session, iModel
from pride.llm import RetryPolicy, ScriptedReply, ToolCall, Usage as CallUsage
from pride.messages.codec import parse_json
from pride.store import BranchStore
from pride.testing import openai_server


def statistics() -> dict[str, Any]:
    """Figures a numeric tool may well produce."""
    return {"mean": math.nan, "max": math.inf, "min": -math.inf, "count": 0}


async def test_issue36_a_tool_s_non_finite_numbers_reach_the_model_as_null(
    tmp_path: Path,
) -> None:
    """The model is shown strict JSON (null for each non-finite number), and the store
    keeps exactly what the model was shown: the same after a restart as before."""
    path = tmp_path / "store.db"
    async with openai_server([ToolCall("statistics", {}, id="c1"), "noted"]) as server:
        model = iModel(
            "openai/gpt-test",
            base_url=server.base_url,
            api_key="sk-test",
            retry=RetryPolicy(max_retries=0),
        )
        async with Session(store=path) as session:
            branch = await session.spawn(Branch(name="a", chat_model=model, tools=[statistics]))
            await branch.operate("look", actions=True)
            [live] = [m for m in branch.messages if isinstance(m, pride.ActionResponse)]
    [shown] = [m for m in server.requests[1].body["messages"] if m.get("role") == "tool"]
    expected = {"mean": None, "max": None, "min": None, "count": 0}
    assert parse_json(shown["content"]) == expected
    assert live.output == expected
    async with BranchStore(path, read_only=True) as store:
        [stored] = [m for m in await store.load_messages("a") if m.role == "action"][1:]
    assert stored.output == expected and stored.result_text == shown["content"]


async def test_issue36_the_call_log_dump_is_strict_json(tmp_path: Path) -> None:
    """``branch.dump_logs`` writes JSON lines a strict reader accepts, whatever the
    application's own model reported."""
    model = ScriptedModel(
        [ScriptedReply("ok", usage=CallUsage(1, 1, cached_tokens=0, cost_usd=math.nan))]
    )
    async with Branch(chat_model=model) as branch:
        await branch.chat("hi")
        target = branch.dump_logs(tmp_path / "calls.jsonl")
    lines = Path(target).read_text().splitlines()
    assert lines
    for line in lines:
        entry = parse_json(line)
        assert entry["cost_usd"] is None


async def test_issue36_an_answer_read_from_model_text_is_strict_json() -> None:
    """An answer object read (leniently) from the model's text is given back as strict
    JSON text: a NaN the model wrote becomes null."""
    reason = '{"title": "t", "content": "c", "confidence_score": 0.5}'
    model = ScriptedModel([f'{{"answer": {{"ratio": NaN, "n": 2}}, "reason": {reason}}}'])
    async with Branch(chat_model=model) as branch:
        result = await pride.ask(branch, Operate("ratio?", reason=True))
    assert parse_json(result.output) == {"ratio": None, "n": 2}
