"""Save a conversation to JSON, restore it, and fork it: no API key needed.

Run with ``python examples/save_restore_clone.py``. See docs/persistence.md.
"""

from __future__ import annotations

import json

import trio

from pride import Branch, ScriptedModel


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def echo() -> ScriptedModel:
    """A model that repeats the last user message."""
    return ScriptedModel(lambda request: f"noted: {request.messages[-1]['content']}")


async def main() -> None:
    original = Branch(system="You are a terse assistant.", chat_model=echo(), tools=[add])
    async with original:
        await original.chat_and_record("My favourite number is 7.")
        await original.act({"function": "add", "arguments": {"a": 7, "b": 3}})

    # Save: a JSON document with the conversation, its logs and the model config (no keys).
    text = json.dumps(original.to_dict(mode="json"))
    print(f"saved {len(original.messages)} messages in {len(text)} bytes of JSON")

    # Restore: a new, standalone branch; live things (tools, models) are re-wired by code.
    restored = Branch.from_dict(json.loads(text), chat_model=echo())
    restored.register_tools([add])
    async with restored:
        reply = await restored.chat_and_record("What was my favourite number?")
    print(f"restored branch {restored.name!r} answers: {reply}")
    assert restored.messages[:5] == original.messages[:5]

    # Fork: a clone has new ids, the same rendered history, and starts as a new actor.
    fork = original.clone(sender="forker")
    async with fork:
        await fork.chat_and_record("Let us try another number.")
    print(f"fork {fork.name!r} came from {fork.metadata['clone_from']['id'][:8]}...")
    print(f"  original has {len(original.messages)} messages, fork has {len(fork.messages)}")


if __name__ == "__main__":
    trio.run(main)
