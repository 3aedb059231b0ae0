"""A message's JSON text: the short way (msgspec on the message itself) writes what the
converter's way (unstructure, then dump_json) writes, or steps aside."""

from __future__ import annotations

import datetime
import math
import uuid
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pride.errors import InvalidMessage
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
from pride.messages.codec import dump_json, id_text, parse_json, to_json

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
    """The converter's way: unstructure, then strict JSON text."""
    return dump_json(unstructure(message))


def _short_way(message: RoledMessage) -> bool:
    """Whether ``to_json`` wrote ``message`` from the message itself: its keys are
    in the class's order (msgspec's), not the converter's (the id first)."""
    return list(parse_json(to_json(message)))[1] != "id"


@given(_json)
def test_a_message_json_is_the_converter_text_or_refused_alike(data: Any) -> None:
    """Whatever a message holds, ``to_json`` gives the data the converter's way gives
    (key order apart), or refuses it as that way does."""
    for message in _messages(data):
        try:
            expected = parse_json(_codec_row(message))
        except InvalidMessage:
            with pytest.raises(InvalidMessage):
                to_json(message)
            continue
        assert parse_json(to_json(message)) == expected


def test_plain_messages_take_the_short_way() -> None:
    """The common case (text, plain JSON data) never pays for the converter's way."""
    for message in _messages({"usage": {"input_tokens": 3}, "model": "m", "ratio": 0.5}):
        assert _short_way(message)
        text = to_json(message)
        assert parse_json(text) == parse_json(_codec_row(message))
        assert structure(parse_json(text), RoledMessage) == message


def test_what_strict_json_cannot_carry_is_refused_with_its_path() -> None:
    """An integer beyond 64 bits, a key that is not text, a value that is not JSON:
    the short way steps aside (msgspec would write the number, "1" or its own form,
    silently), and the converter's way names what is wrong, so the store's documented
    replacements and their warning still apply. A non-finite float never gets this
    far: it is null once the message is built (issue 36), so what the store keeps is
    what the model was shown."""
    for metadata in ({"x": math.nan}, {"nested": [{"deep": math.inf}]}):
        built = AssistantResponse(assistant_response="a", metadata=metadata)
        assert "null" in to_json(built)
    odd: list[tuple[dict[Any, Any], str]] = [
        ({"x": 2**63}, "AssistantResponse.metadata.x"),
        ({1: "one"}, "AssistantResponse.metadata"),
        ({"when": datetime.datetime(2026, 1, 1)}, "AssistantResponse.metadata.when"),
    ]
    for metadata, path in odd:
        message = AssistantResponse(assistant_response="a", metadata=metadata)
        with pytest.raises(InvalidMessage) as refused:
            to_json(message)
        assert refused.value.problems[0][0] == path
        dump_json(unstructure(message), replace=True)  # what the store writes instead


def test_a_subclass_goes_the_converter_way() -> None:
    """Only the message classes themselves: a subclass may add fields or hooks."""

    class Noted(AssistantResponse):
        pass

    noted = Noted(assistant_response="a")
    assert not _short_way(noted)
    assert parse_json(to_json(noted))["type"] == "AssistantResponse"


def test_issue19_a_message_id_is_stored_as_its_str() -> None:
    """The message_id column holds ``str(id)``, however it is made."""
    for identity in (uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)):
        assert id_text(identity) == str(identity)
    assert id_text("not-a-uuid") == "not-a-uuid"


def test_issue19_a_lone_surrogate_in_a_field_no_converter_scrubs_is_refused() -> None:
    """Text fields are scrubbed when a message is built, but ``image_detail`` (and
    what a caller sets past the converters) is not: msgspec refuses a lone
    surrogate, so the short way steps aside and the converter's way refuses it,
    the store then writing the codec's replacement."""
    message = Instruction(instruction="hi", image_detail=chr(0xD800))  # type: ignore[arg-type]
    mapped = Instruction(instruction="hi", tool_schemas=({"name": chr(0xDC80)},))
    for odd in (message, mapped):
        with pytest.raises(InvalidMessage):
            to_json(odd)
        assert "\ufffd" in dump_json(unstructure(odd), replace=True)


_hostile_text = st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=4)
_hostile_text |= st.text(max_size=4)
_hostile = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _hostile_text, st.datetimes()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(_hostile_text, inner, max_size=3),
        st.dictionaries(st.integers(0, 9), inner, max_size=2),
    ),
    max_leaves=10,
)


def _scrubbed(value: Any) -> Any:
    """What a message keeps of ``value``, written the plain way: lone surrogates
    become U+FFFD, non-finite floats None, everything else as it is."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_scrubbed(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrubbed(item) for item in value)
    return value


def _same(left: Any, right: Any) -> bool:
    """Equal, with types kept (a tuple is not a list) and NaN never expected."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


@given(_hostile)
def test_metadata_keeps_what_strict_json_can_carry_and_the_same_object_when_clean(
    data: Any,
) -> None:
    """A message's metadata (and an action's arguments) is the given mapping with lone
    surrogates and non-finite floats replaced; a mapping with none of them is kept as
    the very object given (nothing copied on the common path)."""
    metadata = data if isinstance(data, dict) else {"value": data}
    expected = _scrubbed(metadata)
    for kept in (
        AssistantResponse(assistant_response="x", metadata=metadata).metadata,
        ActionRequest(function="f", arguments=metadata, call_id="c").arguments,
    ):
        assert _same(kept, expected), (kept, expected)
        if _same(metadata, expected) and not _has_nan(metadata):
            assert kept is metadata


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return value != value
    if isinstance(value, dict):
        return any(map(_has_nan, value)) or any(map(_has_nan, value.values()))
    if isinstance(value, list | tuple):
        return any(map(_has_nan, value))
    return False
