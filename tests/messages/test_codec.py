"""Tests for ``pride.messages.codec``: round trips and clear errors on bad input."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import given, settings, strategies as st

import pride
from pride.messages import (
    Act,
    ActionCall,
    Attach,
    Call,
    Chat,
    Command,
    Decision,
    Instruction,
    InvalidMessage,
    MessageAdded,
    Operate,
    RoledMessage,
    RunStart,
    Signal,
    codec,
    commands,
    from_json,
    structure,
    to_json,
    unstructure,
)
from tests.strategies import instances

ALL_TYPES = codec.registered_types()


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_through_plain_data_and_json(cls: type, data: st.DataObject) -> None:
    """Every travelling type survives unstructure/structure and to_json/from_json unchanged."""
    obj = data.draw(instances(cls))
    assert structure(unstructure(obj), cls) == obj
    assert from_json(to_json(obj), cls) == obj


@pytest.mark.parametrize("cls", ALL_TYPES, ids=lambda cls: cls.__name__)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_tagged_base_dispatches_on_type(cls: type, data: st.DataObject) -> None:
    """Structuring as a base class picks the concrete class from the type tag (a type of no
    tagged base, a stream item such as ReasoningDelta, structures as itself)."""
    bases = (RoledMessage, Command, Signal, Decision)
    base = next((b for b in bases if issubclass(cls, b)), cls)
    obj = data.draw(instances(cls))
    assert type(from_json(to_json(obj), base)) is cls


def test_wire_form_starts_with_type_tag() -> None:
    """The JSON object names its class under "type"."""
    data = json.loads(to_json(Chat("hi")))
    assert next(iter(data)) == "type"
    assert data["type"] == "Chat"
    assert data["instruction"] == "hi"


def test_wrong_type_names_path() -> None:
    """A field of the wrong type raises InvalidMessage naming class and field."""
    with pytest.raises(InvalidMessage) as info:
        from_json('{"type": "Chat", "instruction": 5}', Command)
    assert str(info.value) == "Chat.instruction: expected str, got int"
    assert info.value.path == "Chat.instruction"
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, pride.PrideError)


def test_unknown_tag_is_rejected() -> None:
    """An unknown type tag raises InvalidMessage naming the tag."""
    with pytest.raises(InvalidMessage, match="unknown type tag 'Shout'"):
        structure({"type": "Shout", "instruction": "hi"}, Command)


def test_tag_of_wrong_family_is_rejected() -> None:
    """A signal's tag is not accepted where a command is expected."""
    with pytest.raises(InvalidMessage, match="unknown type tag 'RunStart' for Command"):
        structure({"type": "RunStart"}, Command)


def test_mismatched_tag_for_concrete_class() -> None:
    """Structuring as Chat refuses data tagged as another class."""
    with pytest.raises(InvalidMessage, match="Chat: type tag 'Operate' does not match Chat"):
        structure({"type": "Operate", "instruction": "x"}, Chat)


def test_missing_tag_for_base_class() -> None:
    """A base class cannot be structured without a tag."""
    with pytest.raises(InvalidMessage, match="missing type tag"):
        structure({"instruction": "hi"}, Command)


def test_missing_field_names_path() -> None:
    """A missing required field is named."""
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "Act"}, Command)
    assert str(info.value) == "Act.action_requests: required field missing"


def test_invalid_uuid_names_path() -> None:
    """A malformed UUID string is reported at its field."""
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "RunStart", "turn_id": "not-a-uuid"}, Signal)
    assert str(info.value) == "RunStart.turn_id: invalid UUID 'not-a-uuid'"


def test_non_json_text() -> None:
    """Text that is not JSON raises InvalidMessage at path $."""
    with pytest.raises(InvalidMessage) as info:
        from_json("{not json", Chat)
    assert info.value.path == "$"
    assert "invalid JSON" in str(info.value)


def test_unknown_field_is_rejected() -> None:
    """Extra keys are refused rather than silently dropped."""
    with pytest.raises(InvalidMessage, match="Chat: unknown field"):
        structure({"type": "Chat", "instruction": "hi", "temprature": 0.2}, Chat)


def test_nested_paths_are_named() -> None:
    """Errors inside lists and nested objects carry the full path."""
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "Act", "action_requests": [{"function": 3}]}, Act)
    assert str(info.value) == "Act.action_requests[0].function: expected str, got int"
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "MessageAdded", "message": {"type": "Nope"}}, Signal)
    assert "MessageAdded.message: unknown type tag 'Nope'" in str(info.value)


def test_every_problem_is_reported() -> None:
    """Several bad fields produce one exception listing each path."""
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "Chat", "instruction": 1, "guidance": 2}, Chat)
    paths = [path for path, _ in info.value.problems]
    assert paths == ["Chat.instruction", "Chat.guidance"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"type": "Chat", "images": "x.png"}, "Chat.images"),
        ({"type": "Operate", "max_concurrent": True}, "Operate.max_concurrent"),
        ({"type": "Operate", "reason": "yes"}, "Operate.reason"),
        ({"type": "Operate", "action_strategy": "parallel"}, "Operate.action_strategy"),
        ({"type": "Chat", "context": {"a": {1, 2}}}, "Chat.context"),
        ({"type": "Chat", "chat_model": 7}, "Chat.chat_model"),
        ({"type": "Chat", "tools": 3}, "Chat.tools"),
        ([1, 2], "Chat"),
    ],
)
def test_strict_validation(data: object, expected: str) -> None:
    """Values are never coerced: bool is not int, str is not a list, and so on."""
    with pytest.raises(InvalidMessage) as info:
        structure(data, Chat if isinstance(data, list) else Command)
    assert info.value.path == expected


def test_no_half_built_object_on_error() -> None:
    """A failure raises; nothing partially constructed is returned."""
    result = None
    with pytest.raises(InvalidMessage):
        result = structure({"type": "Chat", "instruction": "ok", "guidance": 1}, Chat)
    assert result is None


def test_live_references_do_not_travel() -> None:
    """Attach's live references serialise as null and return as None."""
    attach = Attach(owner_id=uuid4(), owner_name="s", observer=object(), hooks=object())
    back = from_json(to_json(attach), Attach)
    assert back.owner_id == attach.owner_id
    assert back.observer is None
    assert back.hooks is None


def test_class_response_format_is_refused_on_the_wire() -> None:
    """A class used as response_format works in process but cannot be serialised."""

    class Answer:
        pass

    with pytest.raises(InvalidMessage, match="only a JSON schema dict can be serialised"):
        to_json(Operate("x", response_format=Answer))


def test_model_object_serialises_as_its_projection() -> None:
    """A model object in chat_model serialises through its key-free to_dict()."""

    class FakeModel:
        def to_dict(self) -> dict[str, str]:
            return {"provider": "openai", "model": "gpt"}

    data = unstructure(Chat("x", chat_model=FakeModel()))
    assert data["chat_model"] == {"provider": "openai", "model": "gpt"}


def test_call_keeps_its_keyword_arguments() -> None:
    """Call(name, **kwargs) round-trips with its operation and kwargs."""
    call = Call("summarise", style="short", n=3)
    assert call.kwargs == {"style": "short", "n": 3}
    assert from_json(to_json(call), Command) == call


def test_act_accepts_lists() -> None:
    """Act converts its action requests to a tuple."""
    act = Act([ActionCall("add", {"a": 1})])
    assert act.action_requests == (ActionCall("add", {"a": 1}),)


def test_containers_of_messages() -> None:
    """Lists of tagged messages structure element by element."""
    history = [Instruction(instruction="a"), Instruction(instruction="b")]
    assert structure(unstructure(history), list[RoledMessage]) == history


def test_signal_carries_schema_version() -> None:
    """Signals serialise their schema version."""
    data = unstructure(RunStart(turn_id=uuid4()))
    assert data["schema_version"] == pride.messages.SIGNAL_SCHEMA_VERSION


@pytest.mark.parametrize(
    "cls", [pride.RunEnd, pride.RunFailed, pride.RunSuspended], ids=lambda c: c.__name__
)
def test_terminals_name_model_calls_and_read_version_1(cls: type) -> None:
    """model_calls round-trips; version-1 data (num_turns) still decodes, under the new name."""
    signal = cls(turn_id=uuid4(), model_calls=4, tool_calls=2)
    data = unstructure(signal)
    assert data["model_calls"] == 4 and "num_turns" not in data
    assert data["schema_version"] == 2
    assert from_json(to_json(signal), Signal) == signal

    old = {k: v for k, v in data.items() if k != "model_calls"}
    old |= {"num_turns": 4, "schema_version": 1}
    back = structure(old, Signal)
    assert type(back) is cls and back.model_calls == 4 and back.schema_version == 1
    unversioned = {k: v for k, v in old.items() if k != "schema_version"}
    assert structure(unversioned, Signal).model_calls == 4


def test_num_turns_in_current_data_is_refused_naming_the_rename() -> None:
    """Version-2 data carrying the old name is bad input, and the error says what it became."""
    data = unstructure(pride.RunEnd(model_calls=1)) | {"num_turns": 1}
    del data["model_calls"]
    with pytest.raises(InvalidMessage, match="renamed 'model_calls' in schema version 2"):
        structure(data, Signal)
    both = unstructure(pride.RunEnd(model_calls=1)) | {"num_turns": 1, "schema_version": 1}
    with pytest.raises(InvalidMessage, match="both 'num_turns' and"):
        structure(both, Signal)


def test_num_turns_is_a_deprecated_alias_of_model_calls() -> None:
    """Reading num_turns still works, with a DeprecationWarning pointing at model_calls."""
    end = pride.RunEnd(model_calls=3)
    with pytest.warns(DeprecationWarning, match="model_calls"):
        assert end.num_turns == 3
    with pytest.warns(DeprecationWarning, match="RunFailed.num_turns"):
        assert pride.RunFailed(model_calls=2).num_turns == 2


def test_message_added_embeds_tagged_message() -> None:
    """A signal carrying a message round-trips its concrete message class."""
    signal = MessageAdded(message=Instruction(instruction="hi"), turn_id=uuid4())
    back = from_json(to_json(signal), Signal)
    assert back == signal
    assert type(back.message) is Instruction


# ------------------------------------------------------- issue 14: strict JSON


@pytest.mark.parametrize(
    "number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"], ids=lambda text: text
)
@pytest.mark.parametrize(
    "template",
    [
        '{{"type": "Parse", "text": "x", "similarity_threshold": {}}}',
        '{{"type": "Chat", "context": {{"k": [{}]}}}}',
        '{{"type": "Call", "operation": "op", "kwargs": {{"n": {}}}}}',
    ],
    ids=["float field", "json field", "call kwargs"],
)
def test_issue14_non_finite_numbers_are_invalid_message(template: str, number: str) -> None:
    """NaN, Infinity and floats that overflow to infinity are refused, never decoded."""
    with pytest.raises(InvalidMessage, match="finite"):
        from_json(template.format(number), Command)


@pytest.mark.parametrize("digits", [20, 5000], ids=["past 64 bits", "past Python's limit"])
def test_issue14_oversize_integers_are_invalid_message(digits: int) -> None:
    """An integer beyond 64 bits is refused with InvalidMessage, never a raw ValueError."""
    big = "9" * digits
    for text in (
        f'{{"type": "Parse", "text": "x", "max_retries": {big}}}',
        f'{{"type": "Chat", "context": [-{big}]}}',
    ):
        with pytest.raises(InvalidMessage, match="64-bit"):
            from_json(text, Command)
    assert from_json(f'{{"type": "Chat", "context": {2**63 - 1}}}', Command) == Chat(
        context=2**63 - 1
    )


@pytest.mark.parametrize(
    "command",
    [
        commands.Parse("x", similarity_threshold=float("nan")),
        Chat("x", context={"k": float("inf")}),
        Call("op", n=[float("-inf")]),
        commands.Parse("x", max_retries=2**64),
        Chat("x", context=[-(2**70)]),
    ],
    ids=["float field", "json field", "call kwargs", "int field", "json int"],
)
def test_issue14_what_cannot_be_read_back_is_never_written(command: Command) -> None:
    """to_json refuses a value strict JSON cannot carry (pride would refuse to read it)."""
    with pytest.raises(InvalidMessage):
        to_json(command)


def test_issue14_parse_json_is_strict_and_typed() -> None:
    """codec.parse_json is the one strict JSON reader: every refusal is an InvalidMessage."""
    assert codec.parse_json('{"a": [1, 2.5, "\\ud83d\\ude00", null]}') == {
        "a": [1, 2.5, "\U0001f600", None]
    }
    for text in ("NaN", "[1e999]", "9" * 30, '"\\ud800"', '{"\\udfff": 1}', "[" * 100_000, b"\xff"):
        with pytest.raises(InvalidMessage):
            codec.parse_json(text)


# ------------------------------------------- issue 14: models are named, not configured

CONFIG = {"provider": "openai", "model": "x", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "Chat", "chat_model": CONFIG}, "Chat.chat_model"),
        ({"type": "Communicate", "parse_model": {"model": "x"}}, "Communicate.parse_model"),
        (
            {"type": "Interpret", "text": "t", "interpret_model": CONFIG},
            "Interpret.interpret_model",
        ),
        ({"type": "ReAct", "chat_model": {}}, "ReAct.chat_model"),
        (
            {"type": "Call", "operation": "chat", "kwargs": {"chat_model": CONFIG}},
            "Call.kwargs.chat_model",
        ),
        ({"type": "Call", "operation": "op", "kwargs": {"imodel": ["x"]}}, "Call.kwargs.imodel"),
        (
            {"type": "Call", "operation": "op", "kwargs": {"o": [{"cfg": {"base_url": "h"}}]}},
            "Call.kwargs.o[0].cfg",
        ),
        ({"type": "Call", "operation": "op", "kwargs": {"provider": "openai"}}, "Call.kwargs"),
        ({"type": "Chat", "request_options": {"model": "gpt-4-32k"}}, "Chat.request_options.model"),
        (
            {"type": "Call", "operation": "chat", "kwargs": {"request_options": {"model": "m"}}},
            "Call.kwargs.request_options.model",
        ),
    ],
)
def test_issue14_a_decoded_model_configuration_is_refused(data: object, path: str) -> None:
    """A model configuration (a dict, or keys such as base_url hidden in Call arguments)
    is refused on decode with InvalidMessage naming the field."""
    with pytest.raises(InvalidMessage, match="made available") as info:
        structure(data, Command)
    assert info.value.path == path
    assert structure({"type": "Chat", "request_options": {"temperature": 0}}, Command) == Chat(
        request_options={"temperature": 0}
    )


def test_issue14_a_decoded_model_is_a_name_that_says_where_it_came_from() -> None:
    """Decoded model strings become ModelName (equal to the plain string, so round trips
    hold); in process a plain string or a dict keeps its full meaning."""
    chat = from_json('{"type": "Chat", "chat_model": "openai/a"}', Command)
    assert isinstance(chat.chat_model, commands.ModelName)
    assert chat.chat_model.field == "Chat.chat_model"
    assert chat == Chat(chat_model="openai/a")
    call = from_json(
        '{"type": "Call", "operation": "op", "kwargs": {"x": {"parse_model": "p"}}}', Command
    )
    assert isinstance(call.kwargs["x"]["parse_model"], commands.ModelName)
    assert call.kwargs["x"]["parse_model"].field == "Call.kwargs.x.parse_model"
    assert type(Chat(chat_model="openai/a").chat_model) is str
    assert Chat(chat_model=CONFIG).chat_model == CONFIG


def test_issue14_decoded_data_nests_at_most_max_depth_levels() -> None:
    """JSON nested past MAX_DEPTH is refused at decode, naming where (deep data that only
    just parsed would fail later, in the store's writer, far from where it came in)."""
    deep: object = "x"
    for _ in range(codec.MAX_DEPTH - 1):
        deep = [deep]
    assert from_json(to_json(Chat("ok", context=deep)), Command) == Chat("ok", context=deep)
    with pytest.raises(InvalidMessage, match="nested deeper than 100 levels") as info:
        from_json(json.dumps({"type": "Chat", "context": [deep]}), Command)
    assert info.value.path.startswith("$.context[0]")


KEY = "k" * 12_000_000
"""A key as long as a request line leaves room for, over many values."""


@pytest.mark.parametrize(
    "wrap",
    [
        lambda data: data,
        lambda data: {"type": "Chat", "context": data},
        lambda data: {"type": "Call", "operation": "op", "kwargs": {"x": data}},
    ],
    ids=["parse_json", "json-field", "call-kwargs"],
)
def test_a_long_key_over_many_values_is_decoded_in_linear_time(wrap: Any) -> None:
    """Text from outside is hostile: every value's path (``$.KEY[7]``) was formatted as
    the data was walked, copying the key into the path of each value under it, in
    parse_json's checks, a JSON field's and a Call's arguments' (a 1 MB key over
    80,000 lists took 1.5 s of the event loop, over 400,000 numbers 7 s: quadratic).
    Formatted only for a refusal, 12 MB of key over 200,000 lists is decoded at once
    (copied for each, 2.4 TB: a timeout if it is not)."""
    text = json.dumps(wrap({KEY: [[]] * 200_000}))
    decoded = codec.parse_json(text) if wrap({}) == {} else from_json(text, Command)
    assert decoded is not None


def test_a_long_key_over_many_values_is_written_in_linear_time() -> None:
    """What pride writes of data it did not choose (a parse of model text, shown on
    ``pride run``'s stdout) is walked for what strict JSON cannot carry when a lone
    surrogate is in it: the walk formatted a path for every value on its way, a copy
    of the long key above each. Formatted only for what it finds, it is quick (a
    timeout if it is not)."""
    text = codec.dump_json({KEY: [0] * 200_000, "z": chr(0xD800)}, replace=True)
    assert text.endswith('"z":"\ufffd"}')


def test_model_names_under_a_long_key_share_its_path() -> None:
    """Each model name decoded from a Call's arguments says where it came from; made
    for each as it was decoded, the path was a copy of every key above it, so names
    under one long key held one copy each (a 160 KB line took 320 MB). Made when
    asked, it is the same text, and the names take no memory of the key's."""
    key = "k" * 100_000
    names = 5_000
    line = json.dumps(
        {"type": "Call", "operation": "op", "kwargs": {key: [{"chat_model": "m"}] * names}}
    )
    tracemalloc.start()
    try:
        call = from_json(line, Command)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 25_000_000  # a copy of the key for each name took 500 MB
    assert call.kwargs[key][4_999]["chat_model"].field == f"Call.kwargs.{key}[4999].chat_model"


@pytest.mark.parametrize(
    ("data", "container"),
    [
        ({"type": "Act", "action_requests": [5] * 20_000}, "Act.action_requests"),
        ({"type": "Chat", "images": [5] * 20_000}, "Chat.images"),
        (
            {
                "type": "Resume",
                "turn_id": str(uuid4()),
                "decisions": dict.fromkeys(map(str, range(20_000)), 5),
            },
            "Resume.decisions",
        ),
    ],
    ids=["tuple", "tuple-of-str", "mapping"],
)
def test_a_list_of_bad_items_is_refused_at_its_first_problems(data: Any, container: str) -> None:
    """A list (or object) from outside whose items are all bad was checked item by
    item to its end, an exception with its notes kept for each: 200,000 of them (a
    600 KB request line, where 16 MB are let in) took 12 s of the event loop and made
    an error of 16 MB. The first MAX_ITEM_PROBLEMS are named, then one line says the
    rest was not checked. (Before, these 20,000 items made 20,000 problems and an
    error of 1.5 MB.)"""
    cap = codec.MAX_ITEM_PROBLEMS
    with pytest.raises(InvalidMessage) as info:
        from_json(json.dumps(data), Command)
    paths = [path for path, _ in info.value.problems]
    assert len(paths) == cap + 1
    assert all(path.startswith((f"{container}[", f"{container}.")) for path in paths[:-1])
    assert paths[-1] == container
    assert info.value.problems[-1][1] == (
        f"{cap} items were refused; the items after the {cap}th were not checked (fix these first)"
    )


def test_max_item_problems_bad_items_are_all_named() -> None:
    """Up to the bound, every bad item is named, and nothing is said of a rest."""
    cap = codec.MAX_ITEM_PROBLEMS
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "Chat", "images": ["ok", *[5] * cap]}, Command)
    assert [path for path, _ in info.value.problems] == [
        f"Chat.images[{index}]" for index in range(1, cap + 1)
    ]
