"""Bad input is rejected with a clear typed exception, and the actor keeps serving.

Wire data goes through the codec: whatever the bytes, ``from_json`` returns a
command or raises :class:`~pride.InvalidMessage` (the fuzz runs below feed it
over 11,000 malformed documents in a few seconds). In process, ``send``
refuses what is not a command with ``TypeError``; a command whose fields hold
nonsense fails its own turn (``RunFailed``, the caller gets the exception)
and never the actor.
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, example, given, settings, strategies as st

import pride
from pride import (
    Attach,
    Branch,
    Call,
    Chat,
    ChatAndRecord,
    InvalidMessage,
    UnknownOperation,
)
from pride.messages import Command, codec, commands
from tests.helpers import echo_model
from tests.reliability.invariants import InvariantChecker
from tests.strategies import json_values

# A fixed corpus of valid command documents to mutate (cheap to draw from).
VALID: list[dict[str, Any]] = [
    codec.unstructure(command)
    for command in (
        Chat("hi", guidance="g", context={"k": [1, 2.5, None]}, images=("u",)),
        ChatAndRecord("rec", request_options={"temperature": 0.1}, chat_model="openai/x"),
        commands.Communicate("c", response_format={"type": "object"}, num_parse_retries=1),
        commands.Operate("o", tools=("a", "b"), actions=True, max_rounds=2),
        commands.Parse("text", fill_mapping={"a": 1}, similarity_threshold=0.5),
        commands.Interpret("raw", domain="d"),
        commands.Act([commands.ActionCall("f", {"x": 1}, "id")], strategy="sequential"),
        commands.ReAct("r", max_extensions=2, reasoning_effort="low"),
        commands.ReActStream("s", interpret=True),
        commands.Run("run", max_rounds=1),
        Call("op", a=1, b=[True]),
        Attach(owner_name="s"),
        commands.Detach(),
        commands.Stop(reason="shutdown"),
    )
]
FIELD_NAMES = sorted({key for document in VALID for key in document})
WEIRD = st.one_of(
    json_values,
    st.sampled_from([[], {}, "", -1, 2**70, 1e308, True, "NaN", [[[]]], {"type": "Chat"}]),
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid command document, broken one way or several, as JSON text."""
    document = dict(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.integers(0, 4))
        key = draw(st.sampled_from([*document, *FIELD_NAMES, "type", "zzz"]))
        if how == 0:
            document.pop(key, None)
        elif how == 1:
            document[key] = draw(WEIRD)
        elif how == 2:
            document["type"] = draw(st.sampled_from(["", "chat", "Signal", "RunEnd", 7, None]))
        elif how == 3:
            document = {"type": document.get("type"), key: document}  # nested wrongly
        else:
            document[key] = [document.get(key)]
    text = json.dumps(document)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # truncated
    return text


wire_input = st.one_of(mutated(), st.text(max_size=40), st.binary(max_size=40))

WEIRD_VALUES: list[Any] = [
    [],
    {},
    "",
    -1,
    2**70,
    1e308,
    True,
    None,
    "NaN",
    [[[]]],
    {"type": "Chat"},
]
JUNK = '{}[]",:0123456789.eE+-truefalsnl\\ \u00e9\x00'


def scramble(rng: random.Random) -> str | bytes:
    """One cheap random mutation of a valid command document (a fuzz case)."""
    document = dict(rng.choice(VALID))
    for _ in range(rng.randint(0, 2)):
        key = rng.choice([*document, *FIELD_NAMES, "type"])
        roll = rng.random()
        if roll < 0.3:
            document.pop(key, None)
        elif roll < 0.8:
            document[key] = rng.choice(WEIRD_VALUES)
        else:
            document = {"type": document.get("type"), key: document}
    text = json.dumps(document)
    for _ in range(rng.randint(0, 3)):
        at = rng.randint(0, len(text))
        roll = rng.random()
        if roll < 0.4:
            text = text[:at] + rng.choice(JUNK) + text[at + 1 :]
        elif roll < 0.7:
            text = text[:at] + text[at + rng.randint(1, 8) :]
        elif roll < 0.9:
            text = text[:at]
        else:
            text = text[:at] + "[" * rng.randint(1, 3000) + text[at:]
    if rng.random() < 0.05:
        return text.encode("utf-8", "surrogatepass")[: rng.randint(0, len(text))]
    return text


def assert_command_or_invalid(text: str | bytes) -> None:
    try:
        command = codec.from_json(text, Command)
    except InvalidMessage:
        return
    assert isinstance(command, Command)
    assert codec.from_json(codec.to_json(command), Command) == command


@settings(max_examples=1_000, suppress_health_check=[HealthCheck.too_slow])
@given(wire_input)
@example("[" * 100_000)  # regression (issue 10): deep nesting raised RecursionError
@example('{"type": "Chat", "instruction": "x", "context": ' + "[" * 50_000 + "]" * 50_000 + "}")
def test_fuzzed_wire_input_is_a_command_or_invalid_message(text: str | bytes) -> None:
    """Any bytes: from_json gives a command that round-trips, or raises InvalidMessage."""
    assert_command_or_invalid(text)


@settings(max_examples=200)
@given(st.integers(0, 2**32))  # a seed: hypothesis's own Random would draw every call
def test_ten_thousand_scrambled_documents(seed: int) -> None:
    """10,000 cheap mutations (200 examples of 50): each a command or InvalidMessage."""
    rng = random.Random(seed)
    for _ in range(50):
        assert_command_or_invalid(scramble(rng))


def test_deeply_nested_data_is_invalid_message_in_every_direction() -> None:
    """Nesting beyond the recursion limit is InvalidMessage, not RecursionError."""
    deep: Any = []
    for _ in range(50_000):
        deep = [deep]
    with pytest.raises(InvalidMessage, match="nested too deeply"):
        codec.structure({"type": "Chat", "instruction": "x", "context": deep}, Command)
    with pytest.raises(InvalidMessage, match="nested too deeply"):
        codec.to_json(Chat("x", context=deep))
    with pytest.raises(InvalidMessage, match="nested too deeply"):
        codec.from_json("[" * 100_000, Command)


NOT_COMMANDS = st.one_of(
    json_values,
    st.sampled_from([Chat, object(), pride.RunEnd(), pride.Instruction(instruction="hi"), b"x"]),
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NOT_COMMANDS, min_size=1, max_size=5))
async def test_send_refuses_anything_but_a_command(values: list[Any]) -> None:
    """send, send_nowait, ask and stream raise TypeError for non-commands; the actor serves on."""
    async with Branch(chat_model=echo_model()) as branch:
        for value in values:
            with pytest.raises(TypeError, match="expected a pride command"):
                await pride.send(branch, value)
            with pytest.raises(TypeError, match="expected a pride command"):
                pride.send_nowait(branch, value)
            with pytest.raises(TypeError, match="expected a pride command"):
                await pride.ask(branch, value)
            with pytest.raises(TypeError):
                async with pride.stream(branch, value):
                    pass
        assert await branch.chat("still here") == "re: still here"


# Command fields given values of the wrong type (in process, where nothing validates them).
WRONG = st.one_of(
    st.sampled_from([5, None, -1, 1e9, "", b"bytes", object(), ["x"], {"a": object()}, ("t",)]),
    json_values,
)
WORK = [Chat, ChatAndRecord, commands.Communicate, commands.Operate, commands.Parse,
        commands.Interpret, commands.Run, commands.ReAct]  # fmt: skip


@st.composite
def wrong_commands(draw: st.DrawFn) -> Any:
    cls = draw(st.sampled_from(WORK))
    # (clear_messages resets the history on purpose, which no signal reports.)
    fields = [f for f in attrs.fields(cls) if f.init and f.name != "clear_messages"]
    kwargs = {}
    for field in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True)):
        kwargs[field.alias] = draw(WRONG)
    positional = kwargs.pop("instruction", kwargs.pop("text", "x"))
    try:
        return cls(positional, **kwargs)
    except (TypeError, ValueError):  # refused at construction: fine, nothing to send
        return None


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(wrong_commands(), min_size=1, max_size=4))
async def test_commands_with_nonsense_fields_fail_their_turn_not_the_actor(
    batch: list[Any],
) -> None:
    """Each wrongly typed command is served or fails its own turn; the next turn is answered."""
    checker = InvariantChecker()
    with checker.envelopes():
        async with Branch(chat_model=echo_model(), observer=checker) as branch:
            checker.baseline(branch)
            for command in batch:
                if command is None:
                    continue
                with trio.fail_after(5):
                    try:
                        await pride.ask(branch, command)
                    except Exception as exc:
                        assert not isinstance(exc, BaseExceptionGroup)
                assert await branch.chat("next") == "re: next"
    checker.check(branch, quiescent=True)


@pytest.mark.parametrize(
    "command",
    [
        commands.Run(5),  # type: ignore[arg-type]
        ChatAndRecord("x", guidance=7),  # type: ignore[arg-type]
        commands.Communicate("x", plain_content=["not", "text"]),  # type: ignore[arg-type]
        commands.Operate("x", images=(1, 2)),  # type: ignore[arg-type]
        ChatAndRecord(b"bytes"),  # type: ignore[arg-type]
    ],
    ids=["instruction", "guidance", "plain_content", "images", "bytes"],
)
async def test_issue10_a_non_text_prompt_fails_its_turn_and_records_nothing(command: Any) -> None:
    """A prompt field that is not text is a TypeError naming it, before anything is
    recorded; it used to record an Instruction no request could render, failing every
    later turn of the branch."""
    async with Branch(chat_model=echo_model()) as branch:
        with pytest.raises(TypeError, match=rf"{type(command).__name__}\.\w+ must be"):
            await pride.ask(branch, command)
        assert len(branch.messages) == 0
        assert await branch.chat_and_record("next") == "re: next"


async def test_issue10_a_malformed_attach_is_refused_and_the_branch_keeps_working() -> None:
    """Attach with references that are not an observer, hooks, registry or directory is a
    TypeError, and the branch's wiring is left as it was (it used to break every later turn)."""
    async with Branch(chat_model=echo_model()) as branch:
        for bad in (
            Attach(observer=5),
            Attach(hooks="nope"),
            Attach(operations={}),
            Attach(directory=object()),
            Attach(memory=[]),
        ):
            with pytest.raises(TypeError):
                await pride.ask(branch, bad)
            assert await branch.chat("fine") == "re: fine"
        assert branch.owner_id is None


@pytest.mark.parametrize(
    "data",
    [
        {"type": "Call", "operation": "dump_logs", "kwargs": {"path": "PATH"}},
        {"type": "Call", "operation": "_close_mailbox", "kwargs": {"detail": "remote"}},
        {"type": "Call", "operation": "__init__", "kwargs": {}},
        {"type": "Call", "operation": "serve", "kwargs": {}},
        {"type": "Call", "operation": "to_dict", "kwargs": {}},
        {"type": "Call", "operation": "run_hook", "kwargs": {"point": "p", "payload": {}}},
        {"type": "Call", "operation": "aclone", "kwargs": {}},
    ],
)
async def test_issue10_a_call_reaches_only_operations(data: dict[str, Any], tmp_path: Any) -> None:
    """A Call from the wire runs verbs and registered operations only: never a private
    method, the actor's own machinery or a sync method with side effects (a written file)."""
    target = tmp_path / "written.jsonl"
    if "path" in data["kwargs"]:
        data = {**data, "kwargs": {"path": str(target)}}
    command = codec.structure(data, Command)
    async with Branch(chat_model=echo_model()) as branch:
        await branch.chat_and_record("something to log")
        with pytest.raises(UnknownOperation):
            await pride.ask(branch, command)
        assert not target.exists()
        assert branch.running
        assert await branch.chat("fine") == "re: fine"
        assert await pride.ask(branch, Call("chat", instruction="verb")) == "re: verb"
