"""Tests for ``pride run``'s request lines (``pride.cli._requests``): any line is a request
or a typed refusal, and every answer line is strict JSON.

The fuzz runs build request lines around the command mutations of
``tests/reliability/test_bad_input.py`` and then break the line itself: ids a
JSON client could not match, NaN and overflowing numbers, lone surrogates,
model configurations, deep nesting, truncation and stray bytes.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, example, given, settings, strategies as st

from pride import InvalidMessage, WorkCommand
from pride.cli._requests import MAX_ID, RequestRejected, error_line, ok_line, parse_request
from pride.messages import codec, commands
from tests.reliability.test_bad_input import mutated, scramble
from tests.strategies import json_values

IDS = st.one_of(
    st.sampled_from(["NaN", "Infinity", "1e999", "1.5", "true", "[]", "{}", str(2**53)]),
    st.sampled_from(['"r1"', '""', "null", "0", str(MAX_ID), str(-MAX_ID), '"\\ud800"']),
    st.integers().map(str),
)
CONFIG = '{"provider": "openai", "model": "x", "base_url": "http://127.0.0.1:9", "api_key": "k"}'
BREAKS = ["NaN", "1e400", "-Infinity", "9" * 30, '"\\udc80"', "[" * 200, CONFIG, "\x00", "\ufffd"]


@st.composite
def request_lines(draw: st.DrawFn) -> str:
    """A request line around a (possibly broken) command, then perhaps broken itself."""
    command = draw(st.one_of(mutated(), st.just('{"type": "Chat", "instruction": "hi"}')))
    line = f'{{"id": {draw(IDS)}, "to": "ada", "command": {command}}}'
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from(BREAKS)) + line[at:]
    if draw(st.booleans()) and draw(st.booleans()):
        line = line[: draw(st.integers(0, len(line)))]
    return line


def model_configurations(value: Any) -> list[Any]:
    """Every mapping that sits where a model is chosen, anywhere in ``value``."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in commands.MODEL_FIELDS and isinstance(item, dict):
                found.append(item)
            found.extend(model_configurations(item))
    elif isinstance(value, list | tuple):
        for item in value:
            found.extend(model_configurations(item))
    return found


def assert_request_or_refused(line: str) -> None:
    """The property: a request whose id and command are safe, or a typed refusal; either
    way an answer line that parses as strict JSON and echoes a matchable id."""
    try:
        request = parse_request(line)
    except RequestRejected as rejected:
        assert isinstance(rejected.error, InvalidMessage)
        answer = codec.parse_json(error_line(rejected.request_id, rejected.error))
        assert answer["ok"] is False and answer["id"] == rejected.request_id
        return
    assert isinstance(request.command, WorkCommand)
    assert request.id is None or isinstance(request.id, str) or abs(request.id) <= MAX_ID
    for field in ("chat_model", "parse_model", "interpret_model"):
        model = getattr(request.command, field, None)
        assert model is None or isinstance(model, commands.ModelName), (field, model)
    assert not model_configurations(codec.unstructure(request.command))
    assert codec.parse_json(ok_line(request.id, request.command))["id"] == request.id


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(request_lines())
@example('{"id": "x", "to": "ada", "command": {"type": "Chat", "chat_model": ' + CONFIG + "}}")
@example('{"id": 1, "to": "ada", "command": {"type": "Chat", "instruction": "\\ud800"}}')
@example('{"id": NaN, "to": "ada", "command": {"type": "Chat"}}')
def test_issue14_fuzzed_request_lines_are_requests_or_typed_refusals(line: str) -> None:
    """Any request line: a request with a matchable id and no model configuration in it,
    or RequestRejected carrying an InvalidMessage; every answer line is strict JSON."""
    assert_request_or_refused(line)


@settings(max_examples=100)
@given(st.integers(0, 2**32))
def test_issue14_five_thousand_scrambled_request_lines(seed: int) -> None:
    """5,000 cheap mutations (100 examples of 50), bytes decoded as the line reader does."""
    rng = random.Random(seed)
    for _ in range(50):
        command = scramble(rng)
        if isinstance(command, bytes):
            command = command.decode("utf-8", "replace")
        assert_request_or_refused(
            f'{{"id": {rng.randint(-9, 9)}, "to": "a", "command": {command}}}'
        )


@settings(max_examples=100)
@given(json_values | st.sampled_from([float("nan"), 2**80, chr(0xD800), {"k": {1, 2}}]))
def test_issue14_every_answer_line_is_strict_json(result: Any) -> None:
    """Whatever a turn returns (NaN, a huge int, a lone surrogate, a set), its answer line
    is strict JSON carrying the request id."""
    line = ok_line("r1", result)
    assert codec.parse_json(line)["id"] == "r1"
    assert json.loads(line)["ok"] is True
