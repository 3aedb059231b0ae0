"""Hardening decisions: counts bounded in decoded commands, tool outputs that cannot be
shown, and image URLs a provider would fetch on a requester's behalf."""

from __future__ import annotations

from typing import Any

import pytest

from pride import (
    ActionCall,
    ActionResponse,
    AssistantResponse,
    Branch,
    Budget,
    Call,
    Chat,
    ChatAndRecord,
    InvalidMessage,
    Run,
    ScriptedModel,
    Session,
    WorkCommand,
)
from pride.llm import ModelRequest, ToolCall
from pride.messages import structure
from pride.messages.limits import CEILINGS, check_untrusted, image_url_prefixes, within


def decode(data: dict[str, Any], image_urls: tuple[str, ...] = ()) -> Any:
    """What ``pride run`` does with a request's command."""
    command = structure(data, WorkCommand)
    check_untrusted(command, image_urls=image_urls)
    return command


# ---------------------------------------------------------------- counts


@pytest.mark.parametrize(
    ("command", "field"),
    [
        ("Run", "max_rounds"),
        ("Operate", "max_rounds"),
        ("Operate", "max_concurrent"),
        ("Act", "max_concurrent"),
        ("ReAct", "max_extensions"),
        ("ReActStream", "max_extensions"),
        ("Communicate", "num_parse_retries"),
        ("Parse", "max_retries"),
    ],
)
def test_a_decoded_count_beyond_its_ceiling_is_refused_naming_the_field(
    command: str, field: str
) -> None:
    """At the ceiling it decodes; one past it, or below the floor, is InvalidMessage
    naming the command and the field."""
    base: dict[str, Any] = {"type": command}
    if command == "Act":
        base["action_requests"] = []
    elif command == "Parse":
        base["text"] = "x"
    else:
        base["instruction"] = "x"
    ceiling = CEILINGS[field]
    assert getattr(decode({**base, field: ceiling}), field) == ceiling
    with pytest.raises(InvalidMessage, match=rf"{command}\.{field}: {10**9} is beyond the ceiling"):
        decode({**base, field: 10**9})
    floor = 1 if field == "max_concurrent" else 0
    with pytest.raises(InvalidMessage, match=rf"{command}\.{field}: must be at least {floor}"):
        decode({**base, field: floor - 1})
    # The codec alone still reads it: a command survives a JSON round trip unchanged.
    assert getattr(structure({**base, field: 10**9}, WorkCommand), field) == 10**9


def test_counts_built_in_process_are_the_application_s_own() -> None:
    """The ceilings bind commands from outside, not what the application's code builds."""
    assert Run("x", max_rounds=1_000).max_rounds == 1_000


# ---------------------------------------------------------------- tool output


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for this")

    __repr__ = __str__


class Unspeakable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("not even this")


def unprintable() -> object:
    """Return an object whose str() raises."""
    return Unprintable()


def deep() -> object:
    """Return a list nested beyond the recursion limit."""
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    return value


def unspeakable() -> None:
    """Raise an exception whose str() raises."""
    raise Unspeakable


async def test_an_output_that_cannot_be_shown_is_an_error_the_model_reads() -> None:
    """The call becomes an error ActionResponse, the turn goes on to the model's next
    reply, and the branch keeps serving."""
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return [
                ToolCall("unprintable", {}, id="c1"),
                ToolCall("deep", {}, id="c2"),
                ToolCall("unspeakable", {}, id="c3"),
            ]
        return "carried on"

    tools = [unprintable, deep, unspeakable]
    async with Session() as session:
        branch = await session.spawn(Branch(name="b", tools=tools, chat_model=ScriptedModel(model)))
        items = await session.ask("b", Run("go"))
        responses = [item for item in items if isinstance(item, ActionResponse)]
        errors = {response.function: response.error for response in responses}
        assert errors["unprintable"] is not None and errors["unprintable"].startswith(
            "ToolError: tool 'unprintable' returned a Unprintable that cannot be shown"
        )
        assert "RuntimeError: no text for this" in errors["unprintable"]
        assert errors["deep"] is not None and "RecursionError" in errors["deep"]
        assert errors["unspeakable"] == (
            "Unspeakable: (its message could not be made: RuntimeError)"
        )
        assert all(response.output is None for response in responses)
        replies = [item for item in items if isinstance(item, AssistantResponse)]
        assert replies[-1].text == "carried on"  # the turn went on past the bad calls
        shown = [m["content"] for m in seen[1].messages if m["role"] == "tool"]
        assert len(shown) == 3
        assert all("cannot be shown" in text or "could not be made" in text for text in shown)
        direct = (await branch.act(ActionCall("unprintable", {})))[0]
        assert direct.error is not None and "cannot be shown" in direct.error
        assert await session.ask("b", ChatAndRecord("still there?")) == "carried on"


# ---------------------------------------------------------------- image URLs


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "https://intranet.local/secret.png",
        "file:///etc/passwd",
        "HTTPS://example.com/x.png",
        "ftp://example.com/x.png",
    ],
)
def test_a_decoded_command_carries_images_only_as_data_urls(url: str) -> None:
    """Any other URL is InvalidMessage naming the image; data: URLs pass."""
    data = "data:image/png;base64,iVBORw0KGgo="
    command = decode({"type": "Chat", "instruction": "look", "images": [data]})
    assert command.images == (data,)
    with pytest.raises(InvalidMessage, match=r"Chat\.images\[1\]: .*data: URLs only"):
        decode({"type": "Chat", "instruction": "look", "images": [data, url]})


def test_a_call_cannot_carry_what_its_verb_may_not() -> None:
    """``Call("chat", images=..., max_rounds=...)`` is checked as the verb would be."""
    hostile = {
        "type": "Call",
        "operation": "run",
        "kwargs": {"instruction": "x", "max_rounds": 10**6, "images": ["http://10.0.0.1/a"]},
    }
    with pytest.raises(InvalidMessage) as refused:
        decode(hostile)
    assert [path for path, _ in refused.value.problems] == [
        "Call.kwargs.max_rounds",
        "Call.kwargs.images[0]",
    ]


def test_the_application_allows_the_places_it_trusts() -> None:
    """image_urls=(prefix,): URLs under it decode, others still do not; an allowance for
    every host is refused."""
    cdn = ("https://cdn.example.com/",)
    ok = {"type": "Run", "instruction": "look", "images": ["https://cdn.example.com/a.png"]}
    assert decode(ok, cdn).images == ("https://cdn.example.com/a.png",)
    bad = {"type": "Run", "instruction": "look", "images": ["https://cdn.example.com.evil/a"]}
    with pytest.raises(InvalidMessage, match="data: URLs only"):
        decode(bad, cdn)
    for everything in ("https://", "https://cdn.example.com", "javascript:x"):
        with pytest.raises(ValueError, match="with a host and a path"):
            image_url_prefixes(everything)
        with pytest.raises(ValueError, match="with a host and a path"):
            decode(ok, (everything,))
    with pytest.raises(TypeError, match="sequence of URL prefixes"):
        check_untrusted(Run("look"), image_urls="https://cdn.example.com/")
    assert Run("look", images=("https://anywhere/x.png",)).images  # in process: the app's own


def test_two_decoders_in_one_process_keep_their_own_image_urls() -> None:
    """The allowance is the decoder's, never process-wide: one that trusts a CDN lets
    its URLs through while another, at the same time, still refuses them, and the
    first is unchanged after the second decoded (either order)."""
    image = {"type": "Chat", "instruction": "look", "images": ["https://cdn.example.com/a.png"]}
    trusting, strict = ("https://cdn.example.com/",), ()
    for _ in range(2):
        assert decode(image, trusting).images == ("https://cdn.example.com/a.png",)
        with pytest.raises(InvalidMessage, match=r"images\[0\]"):
            decode(image, strict)
    other = ("https://other.example.org/",)
    with pytest.raises(InvalidMessage):
        decode(image, other)
    assert decode(image, trusting).images


def test_a_budget_from_outside_is_held_within_the_branch_s_field_by_field() -> None:
    """`within` keeps, per limit, the stricter of the request's and the branch's."""
    branch = Budget(max_model_calls=2, max_cost_usd=1.0)
    asked = Chat("hi", budget=Budget(max_model_calls=9, max_duration=5.0))
    assert within(asked, branch).budget == Budget(
        max_model_calls=2, max_cost_usd=1.0, max_duration=5.0
    )
    call = within(Call("relay", budget=Budget(max_model_calls=1), text="x"), branch)
    assert isinstance(call, Call) and call.kwargs == {"text": "x"}
    assert call.budget == Budget(max_model_calls=1, max_cost_usd=1.0)
    assert within(Chat("hi"), branch) == Chat("hi")  # the branch's budget applies as usual
    assert within(asked, None) is asked
