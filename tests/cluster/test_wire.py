"""What crosses the wire to and from hosts: plain data, strictly decoded (no Ray needed)."""

from __future__ import annotations

import attrs
import pytest

import pride
from pride import (
    ActionCall,
    AssistantResponse,
    BranchClosed,
    HostLost,
    Instruction,
    InvalidMessage,
    OperateResult,
    ReActAnalysis,
    Reason,
    RemoteError,
    RunEnd,
    TurnCancelled,
)
from pride.cluster.wire.encoding import (
    decode_error,
    decode_value,
    dumps,
    encode_error,
    encode_value,
    loads,
    loads_text,
)


@attrs.frozen
class _Point:
    x: int
    y: int


class _Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        None,
        "text",
        3,
        2.5,
        True,
        [1, "two", None],
        (1, (2, 3)),
        {"a": [1, {"b": (2,)}]},
        Instruction(instruction="hi"),
        (Instruction(instruction="q"), AssistantResponse(assistant_response="a")),
        RunEnd(turn_id=None),
        pride.Reasoning(provider="anthropic", reasoning="r", signature="s"),
        pride.ReasoningDelta("thinking", provider="anthropic"),
        OperateResult(
            output={"k": 1},
            reason=Reason(title="t", content="c", confidence_score=0.5),
            action_requests=(ActionCall("f", {"x": 1}),),
        ),
        [ReActAnalysis(analysis="a", extension_needed=True)],
        pride.Unparsed("prose", "extraction", "no JSON object found", "Answer", attempts=4),
        OperateResult(output=pride.Unparsed("{}", "schema", "missing value", "Answer")),
    ],
    ids=lambda value: type(value).__name__,
)
def test_values_round_trip_through_json(value: object) -> None:
    """Every value a command returns survives encode, JSON bytes and decode unchanged."""
    data = loads(dumps(encode_value(value)), "value")
    assert decode_value(data) == value


def test_user_types_cross_as_their_fields_and_opaque_ones_are_refused() -> None:
    assert decode_value(encode_value(_Point(1, 2))) == {"x": 1, "y": 2}
    with pytest.raises(InvalidMessage, match="_Opaque has no wire form"):
        encode_value({"inner": [_Opaque()]})
    with pytest.raises(InvalidMessage, match="cannot cross the wire"):
        encode_value(float("nan"))
    with pytest.raises(InvalidMessage, match="non-string key"):
        encode_value({1: "one"})


@pytest.mark.parametrize(
    "data",
    [
        {"$tuple": "not a list"},
        {"$dict": [1]},
        {"$pride": {"type": "NoSuchType"}},
        {"$pride": {"type": "Instruction", "content": 5}},
        {"$result": {"class": "os.system", "fields": {}}},
        {"$result": {"class": "Reason", "fields": {"nope": 1}}},
        {"$unknown": 1},
        {"a": 1, "b": 2},
    ],
    ids=repr,
)
def test_hostile_values_are_refused_naming_the_problem(data: object) -> None:
    """A peer's data that is not a well-formed value raises InvalidMessage, nothing else."""
    with pytest.raises(InvalidMessage):
        decode_value(data)


def test_pride_errors_keep_their_class_and_attributes() -> None:
    for error in (
        TurnCancelled("caller", "dropped before it started"),
        BranchClosed("b", "stopped"),
        HostLost("b", "h1", "ActorDiedError"),
        InvalidMessage([("Chat.instruction", "expected str, got int")]),
        pride.MailboxFull("b", 4),
        pride.RateLimited("slow down", retry_after=2.0, status=429),
    ):
        back = decode_error(loads(dumps(encode_error(error)), "error"))
        assert type(back) is type(error)
        assert str(back) == str(error)
    cancelled = decode_error(encode_error(TurnCancelled("restart")))
    assert isinstance(cancelled, TurnCancelled) and cancelled.reason == "restart"
    lost = decode_error(encode_error(HostLost("b", "h1")))
    assert isinstance(lost, BranchClosed) and lost.host == "h1" and lost.branch_name == "b"
    limited = decode_error(encode_error(pride.RateLimited("x", retry_after=2.0)))
    assert isinstance(limited, pride.RateLimited) and limited.retry_after == 2.0
    failed = decode_error(encode_error(pride.ParseFailed("no JSON", "extraction")))
    assert isinstance(failed, pride.ParseFailed) and failed.failure_kind == "extraction"


def test_other_errors_become_builtins_or_remote_errors() -> None:
    assert type(decode_error(encode_error(KeyError("k")))) is KeyError
    assert type(decode_error(encode_error(ValueError("v")))) is ValueError

    class Mine(Exception):
        pass

    remote = decode_error(encode_error(Mine("boom")))
    assert isinstance(remote, RemoteError)
    assert remote.remote_type.endswith("Mine") and "boom" in str(remote)
    # An exception class not in pride's tree never gets built from wire data.
    forged = decode_error({"kind": "pride", "type": "SystemExit", "message": "x"})
    assert isinstance(forged, RemoteError)
    assert isinstance(decode_error("garbage"), InvalidMessage)


def test_peer_bytes_are_bounded_and_must_be_json() -> None:
    with pytest.raises(InvalidMessage, match="invalid JSON"):
        loads(b"{nope", "batch")
    with pytest.raises(InvalidMessage, match="expected JSON bytes"):
        loads("text", "batch")
    with pytest.raises(InvalidMessage, match="over the"):
        loads(b" " * (64 * 1024 * 1024 + 1), "batch")


@pytest.mark.parametrize(
    "payload",
    [b"NaN", b"[Infinity]", b"[1e400]", b'"\\ud800"', b'{"a": "\xff"}', b"[" * 100_000],
    ids=["nan", "infinity", "out of range", "lone surrogate", "bad utf-8", "deep nesting"],
)
def test_json_that_no_side_could_send_back_is_refused(payload: bytes) -> None:
    # Values a peer could smuggle in as JSON that pride's own encoder refuses to
    # write (non-finite numbers, strings that are not text): refused at the border.
    with pytest.raises(InvalidMessage, match="invalid JSON"):
        loads(payload, "batch")
    with pytest.raises(InvalidMessage, match="invalid JSON"):
        loads_text(payload.decode("utf-8", "surrogateescape"), "envelope.cmd")
