"""Tests for `pride.messages.history`: the provider renderings kept as messages are appended."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from pride.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    RoledMessage,
)
from pride.messages.history import History, merge_entry

MESSAGES = st.lists(
    st.one_of(
        st.builds(Instruction, instruction=st.sampled_from(["", "go"])),
        st.builds(AssistantResponse, assistant_response=st.sampled_from(["", "ok"])),
        st.builds(
            ActionRequest,
            function=st.just("f"),
            call_id=st.sampled_from([None, "c"]),
        ),
        st.builds(
            ActionResponse,
            function=st.just("f"),
            output=st.just(1),
            call_id=st.sampled_from([None, "c"]),
        ),
    ),
    max_size=12,
)


def _merged_one_by_one(messages: list[RoledMessage], shape: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for message in messages:
        merge_entry(
            entries, message.to_openai() if shape == "openai" else message.to_anthropic(), shape
        )
    return entries


@settings(max_examples=300)
@given(MESSAGES, MESSAGES, st.sampled_from(["openai", "anthropic"]))
def test_entries_kept_as_messages_come_are_those_merged_one_by_one(
    before: list[RoledMessage], after: list[RoledMessage], shape: Any
) -> None:
    """Compiled first, then appended to, then compiled again (each compilation handed
    out while more messages come), the entries are those of merging every message in
    turn; an entry handed out is never changed by what comes after."""
    history = History(before)
    first = history.compile(shape)
    handed = [dict(entry) for entry in first]
    for message in after:
        history.append(message)
        assert history.compile(shape) == _merged_one_by_one(
            [*before, *after][: len(history)], shape
        )
    assert first == handed
    assert History([*before, *after]).compile(shape) == _merged_one_by_one([*before, *after], shape)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "text"])
def test_a_reply_with_many_tool_calls_is_kept_in_linear_time(shape: Any, native: bool) -> None:
    """A model reply is hostile, and may ask for many tools at once: its calls are
    assistant entries in a row (one entry in both shapes), their results tool or
    user entries in a row (one entry in Anthropic's). Each merged with the entry
    before it as it came, copying the calls (or the text) so far: quadratic, 80,000
    calls took 15 to 47 s of the event loop. Merged once, 500,000 are quick (a
    timeout if they are not; one call and its result appended again and again, so
    what is measured is the merging)."""
    count = 500_000
    history = History([Instruction(instruction="go")])
    history.compile(shape)  # rendered: what comes next is kept up to date as it comes
    call_id = "c" if native else None
    request = ActionRequest(function="f", arguments={"i": 1}, call_id=call_id)
    response = ActionResponse(function="f", output=1, call_id=call_id)
    for _ in range(count):
        history.append(request)
    for _ in range(count):
        history.append(response)
    entries = history.compile(shape)
    calls = entries[1].get("tool_calls") if shape == "openai" else entries[1]["content"]
    if native or shape == "anthropic":
        assert len(calls) == count
    else:
        assert entries[1]["content"].count("Function: f") == count
    assert len(entries) == (2 + count if shape == "openai" else 3)
