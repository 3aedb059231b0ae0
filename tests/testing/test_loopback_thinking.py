"""Tests for ``pride.testing._thinking``: the loopback server's thinking checks, over HTTP."""

from __future__ import annotations

import copy
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings, strategies as st

from pride.llm import ScriptedReply, ToolCall
from pride.testing import openai_server
from pride.testing._thinking import ThinkingSigner, thinking_refusal
from tests.llm.test_reply_shapes import mutated

THINKING = {"type": "enabled", "budget_tokens": 2048}


async def _post(server: Any, body: Any) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(server.base_url + "/messages", json=body)


def _body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": "c", "max_tokens": 4096, "thinking": THINKING, "messages": messages, **extra}


async def test_budget_rules_are_refused_as_the_api_refuses_them() -> None:
    """A budget under 1024, or not below max_tokens, is a 400 invalid_request_error."""
    ask = [{"role": "user", "content": "hi"}]
    async with openai_server(["never"], require_thinking=True) as server:
        small = await _post(server, _body(ask, thinking={"type": "enabled", "budget_tokens": 5}))
        tight = await _post(server, _body(ask, max_tokens=2048))
    for response in (small, tight):
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert "greater than or equal to 1024" in small.json()["error"]["message"]
    assert "max_tokens" in tight.json()["error"]["message"]
    assert len(server.refusals) == 2


async def test_a_refused_request_uses_no_script_item() -> None:
    """As the API bills nothing for a refusal, the server's script does not move on."""
    ask = [{"role": "user", "content": "hi"}]
    loop = [
        *ask,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1"}]},
    ]
    async with openai_server(["first"], require_thinking=True) as server:
        refused = await _post(server, _body(loop))
        answered = await _post(server, _body(ask))
    assert refused.status_code == 400
    assert answered.json()["content"][-1]["text"] == "first"


async def test_a_redacted_block_verifies_and_a_forged_one_does_not() -> None:
    """Redacted data the server made verifies; any other data is an invalid signature."""
    script = [ScriptedReply(tool_calls=(ToolCall("f", {}, "t1"),), redacted="secret"), "done", "x"]
    async with openai_server(script, require_thinking=True) as server:
        first = (await _post(server, _body([{"role": "user", "content": "go"}]))).json()
        result = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}],
        }
        ask = {"role": "user", "content": "go"}
        good = await _post(
            server, _body([ask, {"role": "assistant", "content": first["content"]}, result])
        )
        forged = copy.deepcopy(first["content"])
        forged[0]["data"] = forged[0]["data"][:-2] + "xx"
        bad = await _post(server, _body([ask, {"role": "assistant", "content": forged}, result]))
    assert first["content"][0]["type"] == "redacted_thinking"
    assert "secret" not in first["content"][0]["data"]
    assert good.status_code == 200
    assert bad.status_code == 400 and "Invalid `signature`" in bad.json()["error"]["message"]


def test_thinking_off_means_no_checks() -> None:
    """A request that does not turn thinking on is never refused for its thinking."""
    loop = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "y"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1"}]},
    ]
    assert thinking_refusal({"model": "c", "messages": loop}, ThinkingSigner()) is None


HOSTILE_BODY = _body(
    [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "redacted_thinking", "data": "abc.def"},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1"}]},
    ]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mutated(HOSTILE_BODY))
def test_any_request_body_is_judged_never_crashes(body: Any) -> None:
    """A client's body of any shape gets a reason or None from the checks, never an exception."""
    verdict = thinking_refusal(body, ThinkingSigner())
    assert verdict is None or isinstance(verdict, str)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=50))
def test_signatures_verify_exactly_the_text_they_sign(text: str) -> None:
    """A signature verifies its own text only; redacted data hides and verifies its text."""
    signer = ThinkingSigner()
    block = {"type": "thinking", "thinking": text, "signature": signer.signature(text)}
    assert signer.verifies(block)
    assert not signer.verifies({**block, "thinking": text + "!"})
    assert not ThinkingSigner().verifies(block)
    assert signer.verifies({"type": "redacted_thinking", "data": signer.redacted_data(text)})
