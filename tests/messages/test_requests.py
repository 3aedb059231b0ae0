"""Tests for `pride.messages.requests`: the one decoder of commands from outside.

``pride run``'s request lines and ``pride serve``'s bodies both go through it,
so each rule here holds for both fronts.
"""

from __future__ import annotations

import uuid

import pytest

from pride import (
    ApprovalRequired,
    Budget,
    BudgetExceeded,
    ChatAndRecord,
    InvalidMessage,
)
from pride.messages import PendingCall
from pride.messages.requests import decode_command, describe_error, for_branch, for_remote


def test_a_work_command_decodes_and_a_priority_one_is_refused() -> None:
    """A work command in the wire form decodes; ``Stop`` names its path and the fix."""
    command = decode_command({"type": "ChatAndRecord", "instruction": "hi"})
    assert command == ChatAndRecord(instruction="hi")
    with pytest.raises(InvalidMessage, match=r"request\.command.*for supervisors"):
        decode_command({"type": "Stop"}, where="request.command")


def test_a_model_configuration_is_refused() -> None:
    """A command may name a model, never configure one (an endpoint, a key)."""
    config = {"provider": "openai", "model": "x", "base_url": "http://10.0.0.1/v1"}
    with pytest.raises(InvalidMessage, match="chat_model"):
        decode_command({"type": "Chat", "instruction": "x", "chat_model": config})


def test_an_image_url_needs_an_allowed_prefix() -> None:
    """Images travel inline, or under a prefix the front trusts."""
    data = {"type": "Chat", "instruction": "x", "images": ["https://cdn.example/a.png"]}
    with pytest.raises(InvalidMessage, match="images"):
        decode_command(data)
    assert decode_command(data, image_urls=["https://cdn.example/"]).images


def test_errors_are_described_with_their_data() -> None:
    """``BudgetExceeded`` carries its figures and ``ApprovalRequired`` its turn, as plain data."""
    described = describe_error(BudgetExceeded("max_model_calls", 1, 0))
    assert described["type"] == "BudgetExceeded"
    assert (described["limit"], described["used"], described["allowed"]) == (
        "max_model_calls",
        1,
        0,
    )
    assert describe_error(ValueError("plain")) == {"type": "ValueError", "message": "plain"}
    turn_id = uuid.uuid4()
    held = describe_error(ApprovalRequired(turn_id, [PendingCall("call-1", "launch", {})]))
    assert held["turn_id"] == str(turn_id)
    assert [p["call_id"] for p in held["pending"]] == ["call-1"]


def test_a_requests_budget_never_lifts_a_limit() -> None:
    """To a local branch a budget is held within the branch's; to a placed one it is refused."""
    command = ChatAndRecord(instruction="x", budget=Budget(max_model_calls=10))
    held = for_branch(command, Budget(max_model_calls=2))
    assert held.budget is not None and held.budget.max_model_calls == 2
    with pytest.raises(InvalidMessage, match="cluster host"):
        for_remote(command)


@pytest.mark.parametrize(
    ("command", "path"),
    [
        (
            {"type": "Operate", "instruction": "x", "request_options": {"tools": []}},
            "Operate.request_options.tools",
        ),
        (
            {"type": "Call", "operation": "chat", "kwargs": {"request_options": {"store": True}}},
            "Call.kwargs.request_options.store",
        ),
        (
            {
                "type": "Call",
                "operation": "relay",
                "kwargs": {"steps": [{"request_options": {"input": []}}]},
            },
            "Call.kwargs.steps[0].request_options.input",
        ),
    ],
    ids=["verb", "call", "call-nested"],
)
def test_request_options_from_outside_are_the_sampling_controls_only(
    command: dict[str, object], path: str
) -> None:
    """A request's options beyond REQUEST_OPTIONS are refused, in a verb and in a Call's
    arguments at any depth (tests/serve/test_request_options.py shows what got through)."""
    with pytest.raises(InvalidMessage) as info:
        decode_command(command)
    assert info.value.path == path


def test_every_sampling_control_passes() -> None:
    """Each option of REQUEST_OPTIONS passes as it is."""
    from pride.messages.limits import REQUEST_OPTIONS

    options = dict.fromkeys(REQUEST_OPTIONS, 1)
    command = decode_command({"type": "Chat", "instruction": "x", "request_options": options})
    assert dict(command.request_options) == options  # type: ignore[attr-defined]
