"""parse: JSON extraction, every kind of response format, fuzzy keys, reformat retries."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from typing import Any, TypedDict

import attrs
import msgspec
import pytest

import pride
from pride import Branch, Parse, ParseFailed, ScriptedModel
from pride.operations._fuzzy import jaro_winkler
from tests.helpers import Recorder
from tests.operations.support import Answer, user_texts


@dataclasses.dataclass
class DataAnswer:
    value: int
    note: str = ""


class DictAnswer(TypedDict):
    value: int


class StructAnswer(msgspec.Struct):
    value: int
    note: str = ""


SCHEMA = {
    "title": "Plain",
    "type": "object",
    "properties": {"value": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["value"],
}


def _model(*replies: Any) -> ScriptedModel:
    return ScriptedModel(list(replies))


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        (Answer, Answer(3)),
        (DataAnswer, DataAnswer(3)),
        (DictAnswer, {"value": 3}),
        (StructAnswer, StructAnswer(3)),
        (SCHEMA, {"value": 3}),
        ({"name": "Wrapped", "schema": SCHEMA}, {"value": 3}),
    ],
    ids=["attrs", "dataclass", "TypedDict", "Struct", "schema", "named-schema"],
)
async def test_parse_builds_every_kind_of_format(response_format: Any, expected: Any) -> None:
    """attrs, dataclass, TypedDict, msgspec Struct and JSON-schema formats all parse."""
    async with Branch(chat_model=_model()) as branch:
        assert await branch.parse('{"value": 3}', response_format=response_format) == expected


async def test_parse_builds_a_pydantic_model() -> None:
    """A pydantic model parses through its own validation when pydantic is installed."""
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        value: int

    async with Branch(chat_model=_model('{"value": 9}')) as branch:
        assert await branch.parse('{"value": 5}', response_format=Model) == Model(value=5)
        assert await branch.parse("{}", response_format=Model) == Model(value=9)


@pytest.mark.parametrize(
    "text",
    [
        'Sure! ```json\n{"value": 1}\n```',
        '```\n{"value": 1}\n```',
        'The answer is {"value": 1}. Hope that helps.',
        '{"value": 1,}',
        "{'value': 1, 'note': None}",
        '  {"value": 1}  ',
    ],
    ids=["fenced", "bare-fence", "prose", "trailing-comma", "python-literal", "bare"],
)
async def test_parse_finds_json_in_model_text(text: str) -> None:
    """Fenced, bare and prose-wrapped JSON (and near-JSON) is found without a model call."""
    model = _model()
    async with Branch(chat_model=model) as branch:
        result = await branch.parse(text, response_format=DictAnswer)
    assert result == {"value": 1}
    assert model.calls == []


async def test_fuzzy_key_matching_maps_near_miss_keys() -> None:
    """Misspelt, re-cased and re-styled keys map onto the format's fields (threshold 0.85)."""
    async with Branch(chat_model=_model()) as branch:
        assert await branch.parse('{"Valeu": 2, "NOTE": "x"}', response_format=Answer) == Answer(
            2, "x"
        )
        strict = await branch.parse(
            '{"valeu": 2}', response_format=Answer, fuzzy_match=False, max_retries=0
        )
        # handle_validation="return_value": the text back, typed as a failure
        assert strict == pride.Unparsed(
            '{"valeu": 2}', "schema", strict.error, "Answer", attempts=1
        )
        distant = await branch.parse(
            '{"amount": 2}', response_format=Answer, max_retries=0, handle_validation="return_none"
        )
        assert distant is None


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:06d}" for index in range(count)]


@pytest.mark.parametrize(
    ("text", "properties"),
    [
        (json.dumps(dict.fromkeys(_names("q", 8_000), 1)), _names("p", 8_000)),
        (json.dumps({"a" * 80_000: 1}), ["b" * 80_000]),
    ],
    ids=["many-keys", "long-keys"],
)
async def test_fuzzy_matching_of_keys_from_outside_is_bounded(
    text: str, properties: list[str]
) -> None:
    """A Parse request carries its text and its schema, both hostile: every key the
    schema lacks was compared with every property, each comparison costing the
    product of their lengths (2,000 keys against 2,000 properties took 12 s of the
    event loop, a key of 8,000 characters against a property as long 1.8 s). The
    comparisons of one parse are bounded: the first keys are matched (``q000000``
    is ``p000000`` misspelt), and past the bound a key is left unmatched, as one
    like no property (a timeout if they are not)."""
    schema = {"type": "object", "properties": {key: {} for key in properties}}
    async with Branch(chat_model=_model()) as branch:
        parsed = await branch.parse(
            text, response_format=schema, max_retries=0, handle_validation="raise"
        )
    assert parsed == dict.fromkeys(properties[: len(parsed)], 1)
    assert len(parsed) < len(properties)


async def test_the_required_keys_of_a_wide_schema_are_filled_in_linear_time() -> None:
    """A schema from outside may list many required keys: each property was looked up
    in the list of them to be filled (80,000 took 33 s of the event loop)."""
    names = _names("p", 200_000)
    schema = {"type": "object", "properties": {key: {} for key in names}, "required": names}
    async with Branch(chat_model=_model()) as branch:
        parsed = await branch.parse(
            "{}", response_format=schema, max_retries=0, handle_validation="raise"
        )
    assert parsed == dict.fromkeys(names)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("ignore", {"value": 1, "extra": 2}),
        ("remove", {"value": 1}),
        ("fill", {"value": 1, "extra": 2, "note": "n/a"}),
        ("force", {"value": 1, "note": "n/a"}),
    ],
)
async def test_handle_unmatched_modes(mode: str, expected: dict[str, Any]) -> None:
    """Unmatched keys are kept, removed or forced out; missing keys filled from fill_mapping."""
    async with Branch(chat_model=_model()) as branch:
        result = await branch.parse(
            '{"value": 1, "extra": 2}',
            response_format=SCHEMA,
            handle_unmatched=mode,
            fill_mapping={"note": "n/a"},
            max_retries=0,
        )
    assert result == expected


async def test_handle_unmatched_raise_names_the_keys() -> None:
    """handle_unmatched="raise" fails the parse and names the unexpected key."""
    async with Branch(chat_model=_model()) as branch:
        with pytest.raises(ParseFailed, match="'extra'"):
            await branch.parse(
                '{"value": 1, "extra": 2}',
                response_format=SCHEMA,
                handle_unmatched="raise",
                handle_validation="raise",
                max_retries=0,
            )


async def test_missing_required_key_is_filled_with_fill_value() -> None:
    """force fills a missing required key with fill_value, so a nullable field parses."""

    @attrs.frozen
    class Maybe:
        value: int | None
        note: str = "default kept"

    async with Branch(chat_model=_model()) as branch:
        assert await branch.parse("{}", response_format=Maybe, max_retries=0) == Maybe(None)


async def test_parse_recovers_with_a_reformat_call() -> None:
    """A malformed reply is fixed by one reformat call whose prompt names the error."""
    model = _model('{"value": 7}')
    recorder = Recorder()
    async with Branch(chat_model=model, system="persona", observer=recorder) as branch:
        result = await branch.parse("seven, I think", response_format=Answer)
    assert result == Answer(7)
    [request] = model.calls
    [prompt] = user_texts(request)
    assert "no JSON object found" in prompt and "seven, I think" in prompt
    assert request.response_format is not None and request.response_format["name"] == "Answer"
    assert request.messages[0]["role"] == "user"  # a utility call: no system prompt, no history
    assert len(branch.messages) == 1  # the system message only: parse records nothing
    assert recorder.kinds() == ["RunStart", "RunEnd"]


@pytest.mark.parametrize(
    "reply",
    ["{1: 'x', 'value': 7}", "{(1, 2): 'x'}", "{'value': b'7'}", "[1j]", "{'value': {1, 2}}"],
    ids=["int-key", "tuple-key", "bytes", "complex", "set"],
)
async def test_a_python_literal_that_is_not_json_data_is_no_json(reply: str) -> None:
    """Model output is hostile: the lenient reading of a Python literal took anything
    ``ast.literal_eval`` gives. A key that is not a string made the key matching
    raise AttributeError out of the turn (not a ParseFailed, so no reformat call was
    made), and bytes, complex numbers and sets came back as "JSON" (through operate:
    a TypeError out of the turn). Such a literal is no JSON: the reformat call fixes
    it, and without one the failure is a ParseFailed naming it."""
    model = _model('{"value": 7}')
    async with Branch(chat_model=model) as branch:
        assert await branch.parse(reply, response_format=Answer) == Answer(7)
        with pytest.raises(ParseFailed, match="no JSON object found"):
            await branch.parse(reply, max_retries=0, handle_validation="raise")
    [request] = model.calls
    assert "no JSON object found" in user_texts(request)[0]


@pytest.mark.parametrize(
    ("reply", "schema", "expected"),
    [
        ('{"a": 1}', {"type": "object", "properties": {"a": {"type": [["x"]]}}}, {"a": 1}),
        ("5", {"type": "integer", "properties": {"a": {}}, "required": ["a"]}, 5),
        ('"abc"', {"type": "string", "properties": {"a": {}}, "required": ["a"]}, "abc"),
    ],
    ids=["unhashable-type", "integer-with-keys", "string-with-keys"],
)
async def test_a_schema_from_outside_that_is_not_json_schema_is_no_type_error(
    reply: str, schema: dict[str, Any], expected: Any
) -> None:
    """A Parse carries its schema, which a request line (or a Call) may make: a type
    that is a list of lists, or required keys on a schema of a number or a string,
    made the check raise TypeError out of the turn (``unhashable type``, ``string
    indices must be integers``). What is not JSON schema is passed over; a schema
    that is not an object is refused, saying so; operate takes non-object
    properties as none."""
    async with Branch(chat_model=_model('{"reason": "r"}')) as branch:
        parsed = await pride.ask(
            branch, Parse(reply, response_format=schema, handle_validation="raise")
        )
        assert parsed == expected
        with pytest.raises(TypeError, match="must be a JSON schema object, got int"):
            await branch.parse(reply, response_format={"name": "n", "schema": 5})
        result = await branch.operate(
            "x", response_format={"type": "object", "properties": [1]}, reason=True
        )
        assert result.output == {}


async def test_each_reformat_prompt_names_the_previous_error() -> None:
    """Retries differ: every reformat prompt carries the error of the attempt before it."""
    model = _model('{"value": "many"}', '{"value": 3}')
    async with Branch(chat_model=model) as branch:
        assert await pride.ask(branch, Parse("nothing", response_format=Answer)) == Answer(3)
    first, second = (user_texts(request)[0] for request in model.calls)
    assert "no JSON object found" in first
    assert "Expected `int`, got `str`" in second and "many" in second
    assert first != second


async def _no_json_and_serving_on(reply: str) -> None:
    """Parsing the hostile ``reply`` is a ParseFailed finding no JSON, and the branch
    answers its next ask."""
    async with Branch(chat_model=_model("serving")) as branch:
        with pytest.raises(ParseFailed, match="no JSON object found"):
            await branch.parse(
                reply, response_format=Answer, max_retries=0, handle_validation="raise"
            )
        assert await branch.chat("still there?") == "serving"


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "```json\n" + "[" * 100_000 + "\n```",
        '{"value": ' + "[" * 100_000 + "]" * 100_000 + ",}",
    ],
    ids=["array", "in-object", "fenced", "trailing-comma"],
)
async def test_a_reply_nested_too_deeply_to_read_is_no_json_and_the_branch_serves_on(
    reply: str,
) -> None:
    """Model output is hostile: a reply nested past any JSON reader's depth (the
    standard library raises RecursionError) is a reply with no JSON in it, a
    ParseFailed like any other, and the branch serves on."""
    await _no_json_and_serving_on(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "[" + "1, " * 700_000 + "None]",
        "```json\n{'value': 1, 'note': [" + "'x', " * 400_000 + "]}\n```",
    ],
    ids=["python-list", "fenced-python-dict"],
)
async def test_a_long_python_literal_reply_is_read_in_bounded_memory(reply: str) -> None:
    """Model output is hostile: a reply of two megabytes that is a Python literal
    but not JSON (``None``, single quotes). The lenient reading parsed it with
    ``ast.literal_eval``, whose syntax tree took about 500 bytes for each character
    (2 MB: a gigabyte and 3 s of the event loop; the 32 MiB a provider reply may
    hold would take the process down). Past a bound the text is only read as
    JSON: no JSON in it, and the reading's memory stays a small multiple of the
    reply's."""
    tracemalloc.start()
    try:
        await _no_json_and_serving_on(reply)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(reply)


async def test_only_the_first_hundred_fenced_blocks_are_tried() -> None:
    """Model output is hostile: every fenced block was tried as JSON, each that is not
    costing a failed decode and its repairs, and a reply may hold hundreds of
    thousands (2.4 MB of them took 1.2 s of the event loop; a 32 MiB reply, 17 s).
    The first hundred are tried, then the whole text and the span of braces: a JSON
    block after a hundred others is not looked for."""
    ok = '```json\n{"value": 1}\n```'
    async with Branch(chat_model=_model()) as branch:
        assert await branch.parse("```\n{\n```\n" * 99 + ok, response_format=Answer) == Answer(1)
    await _no_json_and_serving_on("```\n{\n```\n" * 200_000 + ok)


@pytest.mark.parametrize("opener", ["```", "```json", "```json\n"])
async def test_a_long_reply_with_an_unclosed_fence_is_read_in_linear_time(opener: str) -> None:
    """Model output is hostile: a fence opened and never closed, then a megabyte of
    text. The fence pattern once backtracked through the language tag for every
    character after it (40 KB took 7 s, 160 KB two minutes, with every branch of
    the process waiting: the match runs in the event loop). Read in linear time,
    it is a reply with no JSON in it (a timeout of the test suite if it is not)."""
    reply = opener + "x" * 1_000_000
    await _no_json_and_serving_on(reply)


@pytest.mark.parametrize("opener", ["```", "```json", "```json \t"])
async def test_a_fence_then_a_megabyte_of_blanks_is_read_in_linear_time(opener: str) -> None:
    """Model output is hostile: a fence never closed, then a megabyte of spaces and
    tabs. The blanks allowed after the language tag backtracked as the tag once did
    (the body's ``.*?`` matches them too: 80 KB took 30 s of the event loop). Read
    in linear time, it is a reply with no JSON in it (a timeout if it is not)."""
    reply = opener + " \t" * 500_000
    await _no_json_and_serving_on(reply)


async def test_parse_fails_clearly_after_max_retries() -> None:
    """After max_retries reformat calls, handle_validation="raise" raises a clear ParseFailed."""
    model = _model("still no", "nope", "never")
    async with Branch(chat_model=model) as branch:
        with pytest.raises(ParseFailed) as info:
            await branch.parse(
                "junk", response_format=Answer, max_retries=2, handle_validation="raise"
            )
        assert await branch.chat("still serving") == "never"
    message = str(info.value)
    assert "Answer" in message and "2 reformat calls" in message and "no JSON" in message
    assert len(model.calls) == 3


async def test_handle_validation_return_value_and_return_none() -> None:
    """Exhausted retries give an Unparsed carrying the original text, or None."""
    async with Branch(chat_model=_model("x", "y")) as branch:
        unparsed = await branch.parse("junk", response_format=Answer, max_retries=1)
        assert isinstance(unparsed, pride.Unparsed) and not isinstance(unparsed, str)
        assert (unparsed.text, unparsed.failure_kind) == ("junk", "extraction")
        assert unparsed.attempts == 2
        assert unparsed.format == "Answer" and "no JSON object found" in unparsed.error
        assert (
            await branch.parse(
                "junk", response_format=Answer, max_retries=1, handle_validation="return_none"
            )
            is None
        )


@pytest.mark.parametrize(
    ("reply", "kind"),
    [("no json at all", "extraction"), ('{"value": "seven"}', "schema")],
    ids=["no-json", "json-that-does-not-fit"],
)
async def test_a_failure_says_its_kind_under_every_mode(reply: str, kind: str) -> None:
    """No JSON is an "extraction" failure, JSON that does not fit a "schema" one: on the
    Unparsed (return_value) and on the ParseFailed (raise) alike, naming the last error."""
    async with Branch(chat_model=_model()) as branch:
        unparsed = await branch.parse(reply, response_format=Answer, max_retries=0)
        with pytest.raises(ParseFailed) as info:
            await branch.parse(
                reply, response_format=Answer, max_retries=0, handle_validation="raise"
            )
    assert isinstance(unparsed, pride.Unparsed)
    assert unparsed.failure_kind == kind == info.value.failure_kind
    assert unparsed.error in str(info.value)


def test_parse_failed_keeps_its_kind_through_pickling() -> None:
    """ParseFailed(message, kind) survives pickling (process pools and Ray carry errors)."""
    import pickle

    error = pickle.loads(pickle.dumps(ParseFailed("no JSON", "extraction")))
    assert (str(error), error.failure_kind) == ("no JSON", "extraction")


async def test_reformat_calls_are_capped_at_five() -> None:
    """max_retries above 5 makes at most 5 reformat calls."""
    model = ScriptedModel(lambda request: "no json")
    async with Branch(chat_model=model) as branch:
        unparsed = await branch.parse("junk", response_format=Answer, max_retries=50)
    assert isinstance(unparsed, pride.Unparsed) and unparsed.attempts == 6
    assert len(model.calls) == 5


async def test_parse_without_a_format_returns_the_json_value() -> None:
    """With no response format, parse returns the decoded JSON."""
    async with Branch(chat_model=_model()) as branch:
        assert await branch.parse("text [1, 2] ```json\n[1, 2]\n```") == [1, 2]


async def test_parse_uses_the_parse_model() -> None:
    """Reformat calls go to the branch's parse model (or the command's parse_model)."""
    chat, parse_model, override = _model(), _model('{"value": 1}'), _model('{"value": 2}')
    async with Branch(chat_model=chat, parse_model=parse_model) as branch:
        assert await branch.parse("?", response_format=Answer) == Answer(1)
        assert await branch.parse("?", response_format=Answer, parse_model=override) == Answer(2)
    assert chat.calls == []


async def test_bad_arguments_fail_the_turn_and_the_actor_keeps_serving() -> None:
    """A negative max_retries or an unknown handle_validation is a clear ValueError."""
    async with Branch(chat_model=_model("fine")) as branch:
        with pytest.raises(ValueError, match="max_retries"):
            await branch.parse("{}", response_format=Answer, max_retries=-1)
        with pytest.raises(TypeError, match="JSON schema"):
            await branch.parse("{}", response_format=object)
        assert await branch.chat("ok?") == "fine"


def test_jaro_winkler_matches_the_published_values() -> None:
    """The similarity agrees with the textbook examples (Winkler 1990)."""
    assert jaro_winkler("MARTHA", "MARHTA") == pytest.approx(0.9611, abs=1e-4)
    assert jaro_winkler("DWAYNE", "DUANE") == pytest.approx(0.84, abs=1e-4)
    assert jaro_winkler("DIXON", "DICKSONX") == pytest.approx(0.8133, abs=1e-4)
    assert jaro_winkler("same", "same") == 1.0
    assert jaro_winkler("", "x") == 0.0
    assert jaro_winkler("abc", "xyz") == 0.0
