"""A message's row text: the short way (msgspec on the message) writes the codec's row."""

from __future__ import annotations

import datetime
import math
import uuid
from typing import Any

from hypothesis import given, strategies as st

from pride.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    RoledMessage,
    System,
    structure,
    unstructure,
)
from pride.messages.codec import dump_json, parse_json
from pride.store._rows import id_text, message_text, row_text

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # some beyond 64 bits
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.datetimes(),  # not JSON: the codec's way replaces it
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.dictionaries(st.integers(0, 9), inner, max_size=2),  # keys that are not text
    ),
    max_leaves=8,
)


def _messages(data: Any) -> list[RoledMessage]:
    metadata = data if isinstance(data, dict) else {"value": data}
    return [
        System(system_message="be brief", metadata=metadata),
        Instruction(instruction="hi", context=data, metadata=metadata),
        AssistantResponse(assistant_response="hello", metadata=metadata),
        ActionRequest(function="lookup", arguments=metadata, call_id="c1"),
        ActionResponse(function="lookup", arguments=metadata, output=data, call_id="c1"),
    ]


def _codec_row(message: RoledMessage) -> str:
    return row_text(unstructure(message))


@given(_json)
def test_the_short_way_writes_the_codec_row_or_steps_aside(data: Any) -> None:
    """Whatever a message holds, the short way either gives the row the codec's way
    gives (same JSON, key order apart) or None (and the codec's way is taken)."""
    for message in _messages(data):
        text = message_text(message)
        if text is None:
            continue
        assert parse_json(text) == parse_json(_codec_row(message))


def test_plain_messages_take_the_short_way() -> None:
    """The common case (text, plain JSON data) never pays for the codec's way."""
    for message in _messages({"usage": {"input_tokens": 3}, "model": "m", "ratio": 0.5}):
        text = message_text(message)
        assert text is not None
        assert parse_json(text) == parse_json(_codec_row(message))
        assert structure(parse_json(text), RoledMessage) == message


def test_what_strict_json_cannot_carry_goes_the_codec_way() -> None:
    """An integer beyond 64 bits, a key that is not text, a value that is not JSON:
    the short way steps aside (msgspec would write the number, "1" or its own form,
    silently), so the documented replacements and their warning still apply. A
    non-finite float never gets this far: it is null once the message is built
    (issue 36), so what the store keeps is what the model was shown."""
    for metadata in ({"x": math.nan}, {"nested": [{"deep": math.inf}]}):
        built = AssistantResponse(assistant_response="a", metadata=metadata)
        assert "null" in str(message_text(built))
    odd: list[dict[Any, Any]] = [
        {"x": 2**63},
        {1: "one"},
        {"when": datetime.datetime(2026, 1, 1)},
    ]
    for metadata in odd:
        message = AssistantResponse(assistant_response="a", metadata=metadata)
        assert message_text(message) is None
        dump_json(unstructure(message), replace=True)  # what the store writes instead


def test_a_subclass_goes_the_codec_way() -> None:
    """Only the message classes themselves: a subclass may add fields or hooks."""

    class Noted(AssistantResponse):
        pass

    assert message_text(Noted(assistant_response="a")) is None


def test_issue19_a_message_id_is_stored_as_its_str() -> None:
    """The message_id column holds ``str(id)``, however it is made."""
    for identity in (uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)):
        assert id_text(identity) == str(identity)
    assert id_text("not-a-uuid") == "not-a-uuid"


def test_issue19_a_lone_surrogate_in_a_field_no_converter_scrubs_goes_the_codec_way() -> None:
    """Text fields are scrubbed when a message is built, but ``image_detail`` (and
    what a caller sets past the converters) is not: msgspec refuses a lone
    surrogate, so the short way steps aside and the codec's replacement applies."""
    message = Instruction(instruction="hi", image_detail=chr(0xD800))  # type: ignore[arg-type]
    assert message_text(message) is None
    assert "\\ufffd" in dump_json(unstructure(message), replace=True) or "\ufffd" in dump_json(
        unstructure(message), replace=True
    )
    mapped = Instruction(instruction="hi", tool_schemas=({"name": chr(0xDC80)},))
    assert message_text(mapped) is None
