"""The Resume command on the wire: decisions decoded from a request line are hostile."""

from __future__ import annotations

import json
from uuid import uuid4

import pytest

from pride import Approve, Deny, InvalidMessage, Resume, WorkCommand
from pride.cli._requests import RequestRejected, parse_request
from pride.messages import from_json, structure, to_json

TURN = str(uuid4())


def test_resume_survives_a_json_round_trip() -> None:
    command = Resume(uuid4(), {"c1": Approve(), "c2": Deny("no")}, abandon=None)
    assert from_json(to_json(command), WorkCommand) == command
    wire = json.loads(to_json(command))
    assert wire["decisions"] == {"c1": {"type": "Approve"}, "c2": {"type": "Deny", "reason": "no"}}


@pytest.mark.parametrize(
    ("decisions", "path", "reason"),
    [
        ([], "Resume.decisions", "expected an object"),
        ({"c1": "yes"}, "Resume.decisions.c1", "expected an object"),
        ({"c1": {"type": "Maybe"}}, "Resume.decisions.c1", "unknown type tag 'Maybe'"),
        ({"c1": {}}, "Resume.decisions.c1", "missing type tag"),
        ({"c1": {"type": "Deny", "reason": 5}}, "Resume.decisions.c1.reason", "expected str"),
        ({"c1": {"type": "Approve", "arguments": {}}}, "Resume.decisions.c1", "unknown field"),
        ({"c1": {"type": "Chat"}}, "Resume.decisions.c1", "unknown type tag 'Chat'"),
    ],
)
def test_bad_decisions_name_the_path(decisions: object, path: str, reason: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        structure({"type": "Resume", "turn_id": TURN, "decisions": decisions}, WorkCommand)
    assert info.value.path == path
    assert reason in str(info.value)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "Resume"}, "Resume.turn_id"),
        ({"type": "Resume", "turn_id": "not-a-uuid"}, "Resume.turn_id"),
        ({"type": "Resume", "turn_id": 7}, "Resume.turn_id"),
        ({"type": "Resume", "turn_id": TURN, "abandon": 1}, "Resume.abandon"),
        ({"type": "Resume", "turn_id": TURN, "resumed": True}, "Resume"),
    ],
)
def test_bad_resumes_name_the_path(data: dict[str, object], path: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        structure(data, WorkCommand)
    assert info.value.path == path


def test_a_resume_request_line_is_checked_like_any_command() -> None:
    decisions = {"call_1": {"type": "Approve"}, "call_2": {"type": "Deny", "reason": "no"}}
    line = json.dumps(
        {
            "id": "r2",
            "to": "agent",
            "command": {"type": "Resume", "turn_id": TURN, "decisions": decisions},
        }
    )
    request = parse_request(line)
    assert request.command == Resume(
        uuid4().__class__(TURN), {"call_1": Approve(), "call_2": Deny("no")}
    )
    bad = line.replace('"Approve"', '"Approved"')
    with pytest.raises(RequestRejected) as info:
        parse_request(bad)
    assert info.value.request_id == "r2"
    assert info.value.error.path == "Resume.decisions.call_1"
