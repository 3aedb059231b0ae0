"""A tool-using agent: operate with native tool calls, on the scripted model (no API key).

``python examples/tool_agent.py``

The scripted "model" below plays an agent: asked about trips, it calls the
weather and distance tools (two calls at once, which pride runs concurrently
inside the turn), reads their results and answers in the requested format.
Swap ``ScriptedModel(agent)`` for ``"openai/gpt-4.1-mini"`` to run it for real.
"""

from __future__ import annotations

import json

import attrs
import trio

from pride import ActionRequest, ActionResponse, Branch, ScriptedModel
from pride.llm import ModelRequest, ScriptedReply, ToolCall

WEATHER = {"Oslo": "4°C, rain", "Lisbon": "21°C, sun"}
DISTANCE_KM = {("Oslo", "Lisbon"): 2760}


async def get_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: The city name.
    """
    await trio.sleep(0.01)  # a real tool would call an API here
    return WEATHER.get(city, "unknown")


def distance_km(origin: str, destination: str) -> int:
    """Flight distance between two cities, in kilometres.

    Args:
        origin: Where the trip starts.
        destination: Where it ends.
    """
    return DISTANCE_KM.get((origin, destination), 0)


@attrs.frozen
class TripAdvice:
    """What the agent answers."""

    destination: str
    weather: str
    distance_km: int
    advice: str


def agent(request: ModelRequest) -> ScriptedReply | str:
    """A stand-in model: call tools first, answer once their results are in."""
    results = {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}
    if not results:
        return ScriptedReply(
            "Let me check the weather and the distance.",
            (
                ToolCall("get_weather", {"city": "Lisbon"}, id="call_weather"),
                ToolCall("distance_km", {"origin": "Oslo", "destination": "Lisbon"}, id="call_km"),
            ),
        )
    weather = results["call_weather"]
    return json.dumps(
        {
            "destination": "Lisbon",
            "weather": weather,
            "distance_km": int(results["call_km"]),
            "advice": f"Pack light: it is {weather} in Lisbon.",
            "reason": {"title": "tool results", "content": "both tools answered"},
        },
        ensure_ascii=False,
    )


async def main() -> None:
    async with Branch(
        system="You are a travel assistant. Use the tools.",
        chat_model=ScriptedModel(agent),
        tools=[get_weather, distance_km],
    ) as branch:
        result = await branch.operate(
            "I'm in Oslo. Should I fly to Lisbon this weekend?",
            response_format=TripAdvice,
            actions=True,
            reason=True,
        )

    print("transcript")
    for message in branch.messages:
        if isinstance(message, ActionRequest):
            line = f"{message.function}({json.dumps(dict(message.arguments))})"
        elif isinstance(message, ActionResponse):
            line = f"{message.function} -> {message.result_text}"
        else:
            line = message.text
        print(f"  [{type(message).__name__:>17}] {line}")
    print("\nstructured result")
    print(f"  {result.output}")
    print(f"  reason: {result.reason.content if result.reason else None}")
    print(f"  tool calls run: {len(result.action_responses)}")


if __name__ == "__main__":
    trio.run(main)
