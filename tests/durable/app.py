"""The application the durability tests run with ``pride run``: one ReAct agent.

Its turn makes five steps: a model call that asks for two tools (``weather``
then ``temperature``, run sequentially), the two tool calls, a model call
analysing their results, and the final-answer model call. What happens in a
process is written to files in ``PRIDE_TEST_DIR``, one JSON object a line:

* ``calls-<run>.jsonl``: each model call the scripted model received
  (``{"call": "plan" | "analyse" | "answer"}``), ``<run>`` being ``PRIDE_TEST_RUN``;
* ``tools.jsonl``: each tool call that ran, over every process;
* ``signals-<run>.jsonl``: the turn signals (type, turn id, resumed).

``PRIDE_TEST_KILL`` makes the process ``kill -9`` itself at one exact point:
``model:N`` as the N-th model call arrives, ``hook:NAME`` in the
``before_tool_call`` hook of tool NAME (the steps before it are committed,
it has not started), ``tool:NAME`` as tool NAME starts (after its start
was committed), ``ran:NAME`` after tool NAME did its work and before it returns,
``final`` once the final answer is recorded (before the turn's commit), and
``committed`` once the turn is committed (before it is answered).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pride
from pride import Branch, MessageAdded, RunEnd, RunFailed, RunStart, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.operations.react import ANSWER_PROMPT

COMMAND = {
    "type": "ReAct",
    "instruction": "What is the weather in Paris?",
    "action_strategy": "sequential",
}
"""The request the tests send (``{"id": "r1", "to": "agent", "command": COMMAND}``)."""

ANSWER = "Sunny in Paris, 21 C"


def _dir() -> Path:
    return Path(os.environ["PRIDE_TEST_DIR"])


def _write(name: str, record: dict[str, Any]) -> None:
    with (_dir() / name).open("a") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def _kill_at(point: str) -> None:
    if os.environ.get("PRIDE_TEST_KILL") == point:
        os.kill(os.getpid(), signal.SIGKILL)


_received = 0


def _reply(request: ModelRequest) -> ScriptedReply:
    global _received
    _received += 1
    _kill_at(f"model:{_received}")
    last_user = next(
        (m for m in reversed(request.messages) if m.get("role") == "user"), {"content": ""}
    )
    if ANSWER_PROMPT in str(last_user.get("content")):
        label, reply = "answer", ScriptedReply(json.dumps({"answer": ANSWER}))
    elif any(message.get("role") == "tool" for message in request.messages):
        analysis = {"analysis": "sunny and mild", "extension_needed": False}
        label, reply = "analyse", ScriptedReply(json.dumps(analysis))
    else:
        label = "plan"
        reply = ScriptedReply(
            tool_calls=(
                ToolCall("weather", {"city": "Paris"}, id="call_weather"),
                ToolCall("temperature", {"city": "Paris"}, id="call_temperature"),
            )
        )
    _write(f"calls-{os.environ.get('PRIDE_TEST_RUN', '0')}.jsonl", {"call": label})
    return reply


def _tool(name: str, result: str) -> str:
    _kill_at(f"tool:{name}")
    _write("tools.jsonl", {"tool": name})
    _kill_at(f"ran:{name}")
    return result


def weather(city: str) -> str:
    """The sky over a city."""
    return _tool("weather", f"sunny in {city}")


def temperature(city: str) -> str:
    """The temperature in a city, in Celsius."""
    return _tool("temperature", "21")


def _observe(signal_: Any) -> None:
    run = os.environ.get("PRIDE_TEST_RUN", "0")
    if isinstance(signal_, RunStart | RunEnd | RunFailed):
        record = {"type": type(signal_).__name__, "turn_id": str(signal_.turn_id)}
        if isinstance(signal_, RunStart):
            record["resumed"] = signal_.resumed
        _write(f"signals-{run}.jsonl", record)
        if isinstance(signal_, RunEnd):
            _kill_at("committed")
    elif isinstance(signal_, MessageAdded) and ANSWER in signal_.message.text:
        _kill_at("final")


def agent(*, idempotent: bool = False) -> Branch:
    """The agent, with its model and tools (not idempotent unless asked)."""
    return Branch(
        name="agent",
        chat_model=pride.ScriptedModel(_reply),
        tools=[
            pride.Tool(weather, idempotent=idempotent),
            pride.Tool(temperature, idempotent=idempotent),
        ],
    )


def _before_tool(payload: Any) -> None:
    _kill_at(f"hook:{payload['call'].function}")


async def build(session: Session) -> None:
    """``pride run tests.durable.app:build``: the agent, observed."""
    session.observe(lambda s: True, handler=_observe)
    session.hooks.on("before_tool_call", _before_tool)
    idempotent = os.environ.get("PRIDE_TEST_IDEMPOTENT") == "1"
    policy = os.environ.get("PRIDE_TEST_POLICY", "resume")
    durability = pride.Durability(resume=policy)  # type: ignore[arg-type]
    await session.spawn(agent(idempotent=idempotent), durability=durability)
