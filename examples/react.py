"""ReAct: think, act, observe, then answer, streamed round by round (no API key).

``python examples/react.py``

The scripted "model" below researches a question in two rounds: it looks
something up, decides it needs one more round, computes, and then answers.
``branch.ReActStream`` yields each round as it completes (its analysis and
the tools it ran), then the final answer; a controller could send
``branch.control(LoopDirective.CANCEL)`` at any point to stop early.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from pride import Branch, OperateResult, ScriptedModel
from pride.llm import ModelRequest, ToolCall

FACTS = {"speed of light": "299792 km/s", "earth-moon distance": "384400 km"}


def lookup(topic: str) -> str:
    """Look a fact up in the reference book.

    Args:
        topic: What to look up.
    """
    return FACTS.get(topic, "not found")


def divide(numerator: float, denominator: float) -> float:
    """Divide two numbers.

    Args:
        numerator: The number to divide.
        denominator: The number to divide by.
    """
    return round(numerator / denominator, 3)


def analysis(text: str, more: bool) -> str:
    return json.dumps(
        {
            "analysis": text,
            "extension_needed": more,
            "reason": {"title": "plan", "content": text, "confidence_score": 0.8},
        }
    )


def researcher(request: ModelRequest) -> Any:
    """A stand-in model that works through the question in rounds."""
    tool_results = [m["content"] for m in request.messages if m["role"] == "tool"]
    wants = (request.response_format or {}).get("name")
    if wants == "Analysis":
        return json.dumps({"answer": "Light takes about 1.282 s to reach the Moon."})
    if request.messages[-1]["role"] == "tool":  # a round's tools have answered: analyse
        if len(tool_results) == 2:
            return analysis("I have both distances; one more round to divide them.", True)
        return analysis(f"384400 / 299792 = {tool_results[-1]} seconds. Done.", False)
    if not tool_results:  # round 1: look both facts up
        return [
            ToolCall("lookup", {"topic": "earth-moon distance"}, id="call_1"),
            ToolCall("lookup", {"topic": "speed of light"}, id="call_2"),
        ]
    return ToolCall("divide", {"numerator": 384400, "denominator": 299792}, id="call_3")


async def main() -> None:
    async with Branch(
        system="You are a careful physicist.",
        chat_model=ScriptedModel(researcher),
        tools=[lookup, divide],
    ) as branch:
        async with branch.ReActStream("How long does light take to reach the Moon?") as items:
            async for item in items:
                if isinstance(item, OperateResult):
                    for response in item.action_responses:
                        call = f"{response.function}({dict(response.arguments)})"
                        print(f"  act     {call} -> {response.output}")
                    print(f"  think   {item.output.analysis}")
                    print(f"          extension needed: {item.output.extension_needed}")
                else:
                    print(f"answer    {item}")
        print(f"\n{len(branch.messages)} messages recorded in one turn.")


if __name__ == "__main__":
    trio.run(main)
