"""interpret: rewrite raw input into a clearer prompt, recording nothing."""

from __future__ import annotations

import pride
from pride import Branch, Interpret, ScriptedModel
from tests.operations.support import user_texts


async def test_interpret_rewrites_and_records_nothing() -> None:
    """interpret returns the model's rewrite at temperature 0.1; the history is unchanged."""
    model = ScriptedModel(["  List three prime numbers below 20.  "])
    async with Branch(chat_model=model, system="s") as branch:
        result = await branch.interpret("primes?? like 3 of em")
    assert result == "List three prime numbers below 20."
    assert len(branch.messages) == 1
    [request] = model.calls
    assert request.options["temperature"] == 0.1
    assert "primes?? like 3 of em" in user_texts(request)[-1]


async def test_domain_style_and_options_steer_the_rewrite() -> None:
    """domain and style reach the prompt; request_options override the temperature."""
    model = ScriptedModel(["ok"])
    async with Branch(chat_model=model) as branch:
        command = Interpret(
            "fix db", domain="databases", style="terse", request_options={"temperature": 0.7}
        )
        assert await pride.ask(branch, command) == "ok"
    [request] = model.calls
    prompt = user_texts(request)[-1]
    assert "databases" in prompt and "terse" in prompt
    assert request.options["temperature"] == 0.7


async def test_interpret_sees_the_conversation_and_uses_an_override_model() -> None:
    """The history is sent (to resolve references); interpret_model replaces the chat model."""
    chat = ScriptedModel(["earlier answer"])
    other = ScriptedModel(["rewritten"])
    async with Branch(chat_model=chat) as branch:
        await branch.chat_and_record("earlier question")
        assert await branch.interpret("do that again", interpret_model=other) == "rewritten"
        assert branch.chat_model is chat
    roles = [entry["role"] for entry in other.calls[0].messages]
    assert roles == ["user", "assistant", "user"]
