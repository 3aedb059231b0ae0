"""Tool-call arguments nested deeper than pride reads JSON (``MAX_DEPTH``, 100 levels).

The arguments are model output. They were decoded with the standard
library's reader alone, which takes nesting up to the recursion limit (~990
levels), and everything that walks them later (the ActionRequest's text
check, the converter, the store) recurses once or twice per level on top of
the turn's stack: 500 levels raised a bare ``RecursionError`` out of
``session.ask`` (no typed error, no failed call the model could read). They
are now refused where they are read, as pride's JSON reader refuses such
nesting: the call fails with ``arguments_error``, which the model reads.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pride import Branch, Chat, Run, Session, iModel
from pride.llm import RetryPolicy
from pride.messages import ActionResponse
from pride.testing import Fault, openai_server
from tests.helpers import nested_lists, tool_call_reply

DEPTH = 500


def send(payload: object) -> str:
    """Accept anything."""
    return "sent"


def _anthropic(payload: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "call_1", "name": "send", "input": {"payload": payload}}
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [block],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


@pytest.mark.parametrize(
    ("provider", "reply"), [("openai", tool_call_reply), ("anthropic", _anthropic)]
)
async def test_arguments_nested_past_max_depth_fail_the_call_and_the_turn_goes_on(
    provider: str, reply: Any
) -> None:
    body = json.dumps(reply(nested_lists(DEPTH)))  # the loopback server sends it as it is
    script = [Fault.raw(body), "I could not send it", "still here"]
    async with openai_server(script) as server:
        model = iModel(
            f"{provider}/m", base_url=server.base_url, api_key="k", retry=RetryPolicy.never()
        )
        async with Session() as session:
            await session.spawn(Branch(name="agent", chat_model=model, tools=[send]))
            messages = await session.ask("agent", Run("send it"))
            [response] = [message for message in messages if isinstance(message, ActionResponse)]
            assert response.output is None
            assert "nested deeper than 100 levels" in str(response.error), response.error
            assert messages[-1].text == "I could not send it"
            assert await session.ask("agent", Chat("and now?")) == "still here"


async def test_arguments_within_max_depth_still_reach_the_tool() -> None:
    async with openai_server(
        [Fault.raw(json.dumps(tool_call_reply(nested_lists(90)))), "sent"]
    ) as server:
        model = iModel("openai/m", base_url=server.base_url, api_key="k", retry=RetryPolicy.never())
        async with Session() as session:
            await session.spawn(Branch(name="agent", chat_model=model, tools=[send]))
            messages = await session.ask("agent", Run("send it"))
            [response] = [message for message in messages if isinstance(message, ActionResponse)]
            assert response.output == "sent", response.error
