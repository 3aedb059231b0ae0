"""OpenAI's Responses API: a reasoning model's tool loop, on the loopback server (no API key).

``python examples/responses_api.py``

``iModel("openai/o4-mini")`` speaks the Responses API (``POST /responses``),
as OpenAI's reasoning models do by default (``openai_api=`` chooses). Calls
are stateless (``store: false``), so the model's reasoning comes back
encrypted; pride records it as ``Reasoning`` messages and sends it back with
the next call of the tool loop, right before the calls it led to. The
loopback server of ``pride.testing`` plays the API, refusing (as OpenAI does)
reasoning it never issued. Drop its ``base_url`` (and set
``OPENAI_API_KEY``) to run it for real.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio

from pride import Branch, Reasoning
from pride.llm import ScriptedReply, ToolCall, iModel
from pride.testing import openai_server


def get_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: The city name.
    """
    return {"Oslo": "4°C, rain"}.get(city, "unknown")


@attrs.frozen
class Advice:
    """What the agent answers."""

    city: str
    weather: str
    umbrella: bool


def responses_api(body: dict[str, Any]) -> ScriptedReply | str:
    """The stand-in model behind the server: call the tool, then answer from its output."""
    outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    if not outputs:
        return ScriptedReply(
            "Checking the weather.", (ToolCall("get_weather", {"city": "Oslo"}, id="call_1"),)
        )
    advice = {"city": "Oslo", "weather": outputs[0], "umbrella": "rain" in outputs[0]}
    return json.dumps({**advice, "reason": {"title": "weather", "content": outputs[0]}})


async def main() -> None:
    async with openai_server(responses_api) as server:
        model = iModel(
            "openai/o4-mini", base_url=server.base_url, api_key="demo", reasoning_effort="low"
        )
        print(f"{model.provider}/{model.model} speaks {model.openai_api!r}")
        async with Branch(system="Use the tools.", chat_model=model, tools=[get_weather]) as branch:
            result = await branch.operate(
                "Do I need an umbrella in Oslo?", response_format=Advice, actions=True, reason=True
            )
        print("answer:", result.output)
        kept = [m for m in branch.messages if isinstance(m, Reasoning)]
        print(f"reasoning kept in the conversation: {len(kept)} items ({kept[0].provider})")
        for number, request in enumerate(server.requests, start=1):
            body = request.body
            kinds = [item.get("type") or item["role"] for item in body["input"]]
            print(f"request {number}: POST {request.path}")
            print(f"  store={body['store']} include={body.get('include')}")
            print(f"  reasoning={body.get('reasoning')} format={'text' in body}")
            print(f"  input items: {', '.join(kinds)}")


if __name__ == "__main__":
    trio.run(main)
