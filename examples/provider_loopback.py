"""Model access without a network: the scripted model and the loopback server.

Run: ``python examples/provider_loopback.py``. It shows the same iModel
pipeline (retries, streaming, tool calls, usage) against an in-process
ScriptedModel and against pride.testing's real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

import trio

from pride.errors import RateLimited
from pride.llm import ModelRequest, RetryPolicy, ScriptedModel, ScriptedReply, ToolCall, iModel
from pride.testing import Fault, openai_server

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def ask(text: str, tools: tuple[dict[str, Any], ...] = ()) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], tools=tools)


async def scripted() -> None:
    model = ScriptedModel(
        [
            RateLimited("busy", retry_after=0.01),
            "Hello from a script.",
            ToolCall("get_weather", {"city": "Oslo"}),
        ],
        retry=RetryPolicy(base_delay=0.01),
    )
    print("scripted:", (await model.invoke(ask("hi"))).text)
    print("scripted tool call:", (await model.invoke(ask("weather?", tools=(WEATHER,)))).tool_calls)
    print("scripted stats:", model.statistics())


async def over_http() -> None:
    script = [
        Fault.status(503),
        ScriptedReply("Streaming over real HTTP, chunk by chunk."),
        ToolCall("get_weather", {"city": "Lima"}),
    ]
    async with (
        openai_server(script, chunk_size=6) as server,
        iModel(
            "openai/demo",
            base_url=server.base_url,
            api_key="demo-key",
            retry=RetryPolicy(base_delay=0.01),
        ) as model,
    ):
        async with model.stream(ask("stream please")) as stream:
            async for delta in stream:
                print(f"[{delta}]", end="", flush=True)
        print("\nusage:", stream.response.usage)
        reply = await model.invoke(ask("weather in Lima?", tools=(WEATHER,)))
        print("tool call over HTTP:", reply.tool_calls[0].name, reply.tool_calls[0].arguments)
        print("attempts seen by the server:", server.request_count)


async def main() -> None:
    await scripted()
    await over_http()


if __name__ == "__main__":
    trio.run(main)
