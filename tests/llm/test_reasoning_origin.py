"""Reasoning goes back only to the endpoint that produced it.

Claude's signed thinking and OpenAI's encrypted reasoning items are another
provider's data to any endpoint but their own: a branch moved to a third-party
server of the same wire format (another ``base_url``) must not send them there,
and moved back it sends them again. Every call goes to a real loopback server.
"""

from __future__ import annotations

from typing import Any

from pride import Branch, Reasoning
from pride.llm import RetryPolicy, ScriptedReply, iModel
from pride.messages import RoledMessage, from_json, structure, to_json, unstructure
from pride.testing import openai_server

SECRET = "private chain of thought"


def _model(server: Any, spec: str, **options: Any) -> iModel:
    return iModel(
        spec, base_url=server.base_url, api_key="sk-test", retry=RetryPolicy.never(), **options
    )


def _anthropic(server: Any) -> iModel:
    return _model(server, "anthropic/claude-sonnet-4-5", thinking=1024)


def _responses(server: Any) -> iModel:
    return _model(server, "openai/o4-mini", openai_api="responses")


async def test_claudes_thinking_goes_back_to_its_endpoint_and_nowhere_else() -> None:
    script = [ScriptedReply("first", thinking=SECRET), "again"]
    async with openai_server(script) as own, openai_server(["elsewhere"]) as other:
        async with Branch(chat_model=_anthropic(own)) as branch:
            await branch.communicate("think")
            [reasoning] = [m for m in branch.messages if isinstance(m, Reasoning)]
            assert reasoning.origin is not None and own.base_url.split("//")[1] in reasoning.origin
            branch.chat_model = _anthropic(other)
            await branch.communicate("and now?")
            branch.chat_model = _anthropic(own)
            await branch.communicate("back")
    assert SECRET not in str(other.requests[0].body)
    assert SECRET in str(own.requests[-1].body)  # moved back, it goes again


async def test_openai_reasoning_items_go_back_to_their_endpoint_and_nowhere_else() -> None:
    script = [ScriptedReply("first", thinking=SECRET), "again"]
    async with openai_server(script) as own, openai_server(["elsewhere"]) as other:
        async with Branch(chat_model=_responses(own)) as branch:
            await branch.communicate("think")
            [reasoning] = [m for m in branch.messages if isinstance(m, Reasoning)]
            branch.chat_model = _responses(other)
            await branch.communicate("and now?")
            branch.chat_model = _responses(own)
            await branch.communicate("back")
    item_id = reasoning.data["id"]
    assert item_id not in str(other.requests[0].body)
    assert item_id in str(own.requests[-1].body)


def test_the_origin_is_a_json_round_trip_and_an_old_record_loads_without_one() -> None:
    """``origin`` survives the JSON codec; a record stored before it existed loads with
    ``origin=None`` (and is then sent to no endpoint: its producer is unknown)."""
    block = Reasoning(provider="anthropic", reasoning="x", signature="s", origin="anthropic u")
    again = from_json(to_json(block), RoledMessage)
    assert isinstance(again, Reasoning) and again.origin == "anthropic u"
    old = unstructure(block)
    del old["origin"]
    loaded = structure(old, RoledMessage)
    assert isinstance(loaded, Reasoning) and loaded.origin is None
