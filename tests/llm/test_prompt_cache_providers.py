"""Issue 33 item 5: ``prompt_cache`` places Anthropic's breakpoints, and only Anthropic's."""

from __future__ import annotations

import pytest

from pride.llm import ModelRequest, ScriptedModel, iModel


@pytest.mark.parametrize("model", ["openai/gpt-4.1-mini", "openai/o4-mini", "groq/llama-3"])
def test_another_providers_model_refuses_the_option(model: str) -> None:
    """OpenAI-format servers would refuse (or ignore) an unknown field: ValueError, naming
    the provider, when the model is made, instead of a 400 on its first call."""
    with pytest.raises(ValueError, match="prompt_cache places Anthropic's cache breakpoints"):
        iModel(model, api_key="k", prompt_cache=False)


async def test_a_scripted_model_standing_in_for_claude_takes_the_option() -> None:
    """A scripted model answers as scripted, with or without the option."""
    model = ScriptedModel(["ok"], prompt_cache=["system"])
    reply = await model.invoke(ModelRequest([{"role": "user", "content": "hi"}]))
    assert reply.text == "ok"
