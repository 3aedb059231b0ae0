"""Extended thinking on an Anthropic model, through a tool loop, with no network.

Run: ``python examples/thinking.py``. pride.testing's loopback server plays a
thinking Claude model and, told to (``require_thinking=True``), acts as
Anthropic's API does: it signs each thinking block it returns and refuses a
tool loop that does not send the block back unchanged. The branch turns
thinking on with ``thinking=2048`` (a budget of tokens), streams a ``Run``
turn with two tools (the thinking arrives as ``ReasoningDelta`` items, apart
from the answer's text), and keeps the blocks in its conversation as
``Reasoning`` messages, which go back with every later request.
"""

from __future__ import annotations

import json
from typing import Any

import trio

import pride
from pride import Branch, Reasoning, ReasoningDelta, Run, iModel
from pride.errors import BadRequest
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.testing import openai_server


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


def claude(body: dict[str, Any]) -> ScriptedReply:
    """A stand-in thinking model: add, then multiply, then answer (what it does is scripted;
    the thinking blocks, their signatures and the checks are the server's)."""
    results = [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    if not results:
        return ScriptedReply(tool_calls=(ToolCall("add", {"a": 2, "b": 3}),), thinking="Add first.")
    if len(results) == 1:
        return ScriptedReply(tool_calls=(ToolCall("mul", {"a": 5, "b": 4}),), thinking="Then x4.")
    return ScriptedReply("(2 + 3) * 4 = 20", thinking="Both tools answered: 20.")


async def main() -> None:
    async with openai_server(claude, chunk_size=8, require_thinking=True) as server:
        model = iModel(
            "anthropic/claude-sonnet-4-5",
            base_url=server.base_url,
            api_key="sk-ant-demo",
            thinking=2048,  # budget_tokens; max_tokens becomes 2048 + 4096
        )
        async with Branch(chat_model=model, tools=[add, mul]) as branch:
            async with pride.stream(branch, Run("What is (2 + 3) * 4?", tools=True)) as items:
                async for item in items:
                    if isinstance(item, ReasoningDelta):
                        print(f"(thinking: {item.text})")
                    elif isinstance(item, str):
                        print(f"answer chunk: {item!r}")
                    else:
                        print(f"recorded: {type(item).__name__}")
            kept = [m for m in branch.messages if isinstance(m, Reasoning)]
            print(f"thinking blocks kept in the conversation: {len(kept)}")
            print(f"requests refused by the server: {len(server.refusals)}")

            # What the API does to a client that drops the blocks: the second call fails.
            body = server.requests[1].body
            dropped = [
                {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
                if m["role"] == "assistant"
                else m
                for m in body["messages"]
            ]
            try:
                await model.invoke(ModelRequest(dropped))
            except BadRequest as error:
                print("without its thinking block the loop is refused:")
                print("  " + json.dumps(error.provider_message)[:110] + "...")


if __name__ == "__main__":
    trio.run(main)
