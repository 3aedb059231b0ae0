"""ADR-0016 D2: serialisation exports a selected conversation projection."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

import pride
from pride import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Attach,
    Branch,
    Detach,
    Instruction,
    InvalidMessage,
    LogConfig,
    ScriptedModel,
    System,
    iModel,
)
from pride.actors import LogEntry
from pride.operations.registry import OperationManager
from tests import strategies
from tests.helpers import Recorder, echo_model

EMPTY_MESSAGES = {"collections": [], "progression": {"order": []}}
SECRET = "sk-test-SECRET-0123456789abcdef"


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def log_entry(name: str = "m") -> LogEntry:
    return LogEntry(kind="model", name=name, started_at=1.0, duration_ms=2.0, status="ok")


def as_json(data: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(data))
    return loaded


# ------------------------------------------------------------- the projection


def test_projection_keys_come_in_the_documented_order() -> None:
    """Identity fields first, then messages, logs, system, log_config, chat_model, parse_model."""
    branch = Branch(
        chat_model=echo_model(),
        parse_model=echo_model(),
        system="s",
        logs=[log_entry()],
    )
    data = branch.to_dict(include_log_config=True)
    assert list(data) == [
        "id",
        "created_at",
        "metadata",
        "user",
        "name",
        "messages",
        "logs",
        "system",
        "log_config",
        "chat_model",
        "parse_model",
    ]


def test_messages_are_collections_and_progression_in_codec_form() -> None:
    """Collections hold the codec's data of every message; the progression orders their ids."""
    messages = [Instruction(instruction="hi"), AssistantResponse(assistant_response="hello")]
    branch = Branch(chat_model="scripted", system="s", messages=messages)
    data = branch.to_dict(mode="json")["messages"]
    assert data["progression"]["order"] == [str(m.id) for m in branch.messages]
    assert data["collections"] == [pride.messages.unstructure(m) for m in branch.messages]
    assert data["collections"][0]["type"] == "System"


def test_empty_messages_still_produce_the_explicit_empty_shape() -> None:
    """Edge case: empty messages keep their explicit empty form; absence never means empty."""
    for mode in ("python", "json", "db"):
        data = Branch(chat_model="scripted").to_dict(mode=mode)  # type: ignore[arg-type]
        assert data["messages"] == EMPTY_MESSAGES


def test_empty_logs_are_omitted_even_when_include_logs_is_true() -> None:
    """Edge case: an empty log is omitted even with include_logs=True."""
    assert "logs" not in Branch(chat_model="scripted").to_dict(include_logs=True)


def test_logs_are_present_only_when_included_and_non_empty() -> None:
    """Non-empty logs appear by default and disappear with include_logs=False."""
    branch = Branch(chat_model="scripted", logs=[log_entry("a")])
    assert [entry["name"] for entry in branch.to_dict()["logs"]] == ["a"]
    assert "logs" not in branch.to_dict(include_logs=False)


def test_system_is_present_when_a_system_message_exists() -> None:
    """The system key holds the system message's data, only when there is one."""
    branch = Branch(chat_model="scripted", system="Be brief.")
    assert branch.to_dict()["system"]["system_message"] == "Be brief."
    assert "system" not in Branch(chat_model="scripted").to_dict()


def test_log_config_is_present_only_when_included() -> None:
    """log_config appears only with include_log_config=True."""
    branch = Branch(chat_model="scripted", log_config={"capacity": 7})
    assert "log_config" not in branch.to_dict()
    assert branch.to_dict(include_log_config=True)["log_config"]["capacity"] == 7


def test_chat_model_is_always_present() -> None:
    """chat_model is the model's configuration, always."""
    data = Branch(chat_model="openai/gpt-4o").to_dict()
    assert data["chat_model"]["provider"] == "openai" and data["chat_model"]["model"] == "gpt-4o"


def test_a_distinct_parse_model_is_serialised_and_an_aliased_one_once() -> None:
    """Edge case: a distinct parse model is serialised; an aliased one is represented once."""
    aliased = Branch(chat_model="openai/gpt-4o").to_dict()
    assert "parse_model" not in aliased
    distinct = Branch(chat_model="openai/gpt-4o", parse_model="openai/gpt-4o-mini").to_dict()
    assert distinct["parse_model"]["model"] == "gpt-4o-mini"
    restored = Branch.from_dict(aliased)
    assert restored.parse_model is restored.chat_model
    restored = Branch.from_dict(distinct)
    assert restored.parse_model is not restored.chat_model
    assert restored.parse_model.model == "gpt-4o-mini"


def test_request_options_and_processor_config_are_included_on_request() -> None:
    """Request options and rate-limit settings are forwarded only when asked for."""
    model = iModel("openai/gpt-4o", temperature=0.2, limit_requests=10)
    branch = Branch(chat_model=model)
    plain = branch.to_dict()["chat_model"]
    assert "request_options" not in plain and "limit_requests" not in plain
    full = branch.to_dict(include_request_options=True, include_processor_config=True)
    assert full["chat_model"]["request_options"] == {"temperature": 0.2}
    assert full["chat_model"]["limit_requests"] == 10
    assert full["chat_model"]["queue_capacity"] == 100
    restored = Branch.from_dict(full)
    assert restored.chat_model.request_options == {"temperature": 0.2}
    assert restored.chat_model.limit_requests == 10


def test_no_credential_ever_appears_in_the_projection() -> None:
    """An explicit API key never reaches to_dict, in any mode or with any option."""
    branch = Branch(
        chat_model=iModel("openai/gpt-4o", api_key=SECRET),
        parse_model=iModel("anthropic/claude-sonnet-4", api_key=SECRET),
    )
    for mode in ("python", "json", "db"):
        data = branch.to_dict(
            mode=mode,  # type: ignore[arg-type]
            include_request_options=True,
            include_processor_config=True,
            include_log_config=True,
        )
        assert SECRET not in json.dumps(data, default=str)
        assert "api_key" not in json.dumps(data, default=str)


def test_from_dict_never_restores_a_credential(caplog: pytest.LogCaptureFixture) -> None:
    """An api_key smuggled into serialised data is dropped (and logged), never restored."""
    data = Branch(chat_model="openai/gpt-4o").to_dict(mode="json")
    data["chat_model"]["api_key"] = SECRET
    restored = Branch.from_dict(data)
    assert SECRET not in repr(restored.chat_model)
    assert "api_key" in caplog.text and SECRET not in caplog.text


def test_from_dict_does_not_mutate_its_input() -> None:
    """from_dict reads its input only (the reference system popped keys from it)."""
    branch = Branch(
        chat_model=echo_model(),
        parse_model="openai/gpt-4o",
        system="s",
        metadata={"nested": {"a": [1]}},
        logs=[log_entry()],
        messages=[Instruction(instruction="hi")],
    )
    for mode in ("python", "json"):
        data = branch.to_dict(mode=mode, include_log_config=True)  # type: ignore[arg-type]
        snapshot = copy.deepcopy(data)
        restored = Branch.from_dict(data)
        assert data == snapshot
        restored.metadata["nested"]["a"].append(2)
        assert data == snapshot


def test_from_dict_suppresses_the_top_level_system_when_messages_hold_one() -> None:
    """When messages already contain the system message, the top-level one is not re-added."""
    data = Branch(chat_model="scripted", system="from messages").to_dict(mode="json")
    data = copy.deepcopy(data)
    data["system"]["system_message"] = "from the top level"
    restored = Branch.from_dict(data)
    assert restored.system is not None and restored.system.system_message == "from messages"
    assert sum(isinstance(m, System) for m in restored.messages) == 1


def test_from_dict_uses_a_top_level_system_when_messages_hold_none() -> None:
    """A top-level system (data or plain text) fills in when the messages have none."""
    data = Branch(chat_model="scripted").to_dict(mode="json")
    data["system"] = pride.messages.unstructure(System(system_message="top"))
    assert Branch.from_dict(data).system.system_message == "top"  # type: ignore[union-attr]
    data["system"] = "plain text"
    assert Branch.from_dict(data).system.system_message == "plain text"  # type: ignore[union-attr]


async def test_session_references_never_survive_a_round_trip() -> None:
    """Edge case: a deserialised branch is standalone (no owner, observer, hooks, operations)."""
    recorder = Recorder()
    shared = OperationManager()

    async def op(branch: Branch) -> str:
        return "shared"

    shared.register("shared_op", op)
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(
            branch,
            Attach(owner_id=uuid.uuid4(), owner_name="s", observer=recorder, operations=shared),
        )
        assert branch.owner_id is not None
        data = branch.to_dict(mode="json")
        await pride.ask(branch, Detach())
    text = json.dumps(data)
    assert "owner" not in text and "observer" not in text and "shared_op" not in text
    restored = Branch.from_dict(data)
    assert restored.owner_id is None
    assert restored.get_operation("shared_op") is None
    seen = len(recorder.signals)
    restored.add_message(Instruction(instruction="quiet"))
    assert len(recorder.signals) == seen


def test_live_extensions_are_not_serialised_or_reconstructed() -> None:
    """Edge case: tools, providers, capabilities, memory and operations have no portable form."""

    class Static:
        async def provide(self, branch: Branch, instruction: Instruction) -> str:
            return "context"

    async def summarise(branch: Branch) -> str:
        return "summary"

    import attrs

    @attrs.define
    class Caps:
        note: str

    branch = Branch(chat_model="scripted", tools=[add], system="s")
    branch.providers.register(Static())
    branch.grant_capabilities(Caps, prompt=False)
    branch.register_operation("summarise", summarise)
    memory = branch.memory
    data = branch.to_dict(mode="json")
    assert not {"tools", "providers", "capabilities", "memory", "operations"} & set(data)
    restored = Branch.from_dict(data)
    assert len(restored.acts) == 0 and not restored.providers
    assert restored.capabilities is None and restored.get_operation("summarise") is None
    assert restored.memory is not memory and len(restored.memory) == 0  # type: ignore[arg-type]


# ------------------------------------------------------------------ modes


def test_python_mode_keeps_python_values_and_json_mode_is_json_safe() -> None:
    """python mode keeps the UUID id and metadata objects; json mode round-trips through JSON."""
    marker = object()
    branch = Branch(chat_model="scripted", metadata={"obj": marker})
    python = branch.to_dict()
    assert python["id"] == branch.id and isinstance(python["id"], uuid.UUID)
    assert python["metadata"]["obj"] is not None
    plain = Branch(chat_model="scripted", metadata={"t": (1, 2)})
    data = plain.to_dict(mode="json")
    assert data["id"] == str(plain.id) and data["metadata"] == {"t": [1, 2]}
    assert as_json(data) == data


def test_json_mode_names_metadata_that_json_cannot_carry() -> None:
    """json mode raises InvalidMessage naming the metadata path instead of emitting junk."""
    branch = Branch(chat_model="scripted", metadata={"bad": {1, 2}})
    with pytest.raises(InvalidMessage) as caught:
        branch.to_dict(mode="json")
    assert caught.value.path == "Branch.metadata" and "bad" in str(caught.value)


def test_db_mode_stores_metadata_under_the_db_meta_key() -> None:
    """db mode: json mode with metadata under node_metadata (or db_meta_key), read back too."""
    branch = Branch(chat_model="scripted", metadata={"k": 1})
    row = branch.to_dict(mode="db")
    assert "metadata" not in row and row["node_metadata"] == {"k": 1}
    assert list(row)[2] == "node_metadata"
    assert Branch.from_dict(row).metadata == {"k": 1}
    custom = branch.to_dict(mode="db", db_meta_key="meta")
    assert custom["meta"] == {"k": 1}
    assert Branch.from_dict(custom, db_meta_key="meta").metadata == {"k": 1}


def test_an_unknown_mode_is_a_value_error() -> None:
    """Only python, json and db are modes."""
    with pytest.raises(ValueError, match="mode"):
        Branch(chat_model="scripted").to_dict(mode="yaml")  # type: ignore[arg-type]


# ------------------------------------------------------------ restoring


def test_from_dict_restores_identity_messages_logs_and_config() -> None:
    """Every projected field comes back: identity, messages in order, logs, log config."""
    branch = Branch(
        chat_model="scripted",
        user="ada",
        name="research",
        system="s",
        metadata={"k": "v"},
        messages=[Instruction(instruction="q"), AssistantResponse(assistant_response="a")],
        logs=[log_entry("x")],
        log_config={"capacity": 9, "include_content": True},
    )
    restored = Branch.from_dict(branch.to_dict(mode="json", include_log_config=True))
    assert (restored.id, restored.user, restored.name) == (branch.id, "ada", "research")
    assert restored.created_at == branch.created_at and restored.metadata == {"k": "v"}
    assert restored.messages.to_list() == branch.messages.to_list()
    assert [e.name for e in restored.logs] == ["x"]
    assert restored.logs.config == LogConfig(capacity=9, include_content=True)
    assert not restored.running


def test_from_dict_accepts_models_given_by_the_caller() -> None:
    """chat_model and parse_model arguments replace the serialised models."""
    data = Branch(chat_model="openai/gpt-4o").to_dict(mode="json")
    chat, parse = echo_model(), echo_model()
    assert Branch.from_dict(data, chat_model=chat).parse_model is chat
    restored = Branch.from_dict(data, chat_model=chat, parse_model=parse)
    assert restored.chat_model is chat and restored.parse_model is parse


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ([], "Branch"),
        ({"surprise": 1}, "Branch"),
        ({"id": "not-a-uuid"}, "Branch.id"),
        ({"created_at": "yesterday"}, "Branch.created_at"),
        ({"metadata": [1]}, "Branch.metadata"),
        ({"user": 3}, "Branch.user"),
        ({"messages": []}, "Branch.messages"),
        (
            {"messages": {"collections": [{"type": "Nope"}], "progression": {"order": []}}},
            "Branch.messages.collections[0]",
        ),
        (
            {
                "messages": {
                    "collections": [{"type": "Instruction", "instruction": 5}],
                    "progression": {"order": []},
                }
            },
            "Branch.messages.collections[0].instruction",
        ),
        (
            {"messages": {"collections": [], "progression": {"order": [str(uuid.uuid4())]}}},
            "Branch.messages.progression.order[0]",
        ),
        ({"logs": [{"kind": "model"}]}, "Branch.logs[0].name"),
        ({"logs": {"kind": "model"}}, "Branch.logs"),
        ({"log_config": {"capacity": 0}}, "Branch.log_config"),
        ({"chat_model": {"provider": "nowhere", "model": "m"}}, "Branch.chat_model"),
        ({"chat_model": 5}, "Branch.chat_model"),
        ({"system": {"type": "System", "system_message": 1}}, "Branch.system.system_message"),
    ],
)
def test_bad_data_is_rejected_with_invalid_message_naming_the_path(data: Any, path: str) -> None:
    """from_dict raises one InvalidMessage (a ValueError) whose path says where."""
    with pytest.raises(InvalidMessage) as caught:
        Branch.from_dict(data)
    assert caught.value.path == path
    assert isinstance(caught.value, ValueError)


def test_messages_missing_from_the_progression_are_rejected() -> None:
    """Every collected message must appear in the progression, once."""
    message = Instruction(instruction="q")
    data = {
        "messages": {
            "collections": [pride.messages.unstructure(message)],
            "progression": {"order": []},
        }
    }
    with pytest.raises(InvalidMessage, match="missing message id"):
        Branch.from_dict(data)
    data["messages"]["progression"]["order"] = [str(message.id)] * 2  # type: ignore[index]
    with pytest.raises(InvalidMessage, match="twice"):
        Branch.from_dict(data)


def test_every_problem_is_reported_at_once() -> None:
    """Several bad fields give one InvalidMessage listing each path."""
    with pytest.raises(InvalidMessage) as caught:
        Branch.from_dict({"id": 1, "user": 2, "name": 3})
    assert [path for path, _ in caught.value.problems] == [
        "Branch.id",
        "Branch.user",
        "Branch.name",
    ]


# ------------------------------------------------------------- round trips


async def test_a_json_restored_branch_answers_the_next_turn_with_the_same_history() -> None:
    """Serialised to JSON and restored, a branch sends the model the identical request."""
    original = echo_model()
    branch = Branch(chat_model=original, system="Be brief.", user="ada", tools=[add])
    async with branch:
        await branch.chat_and_record("first")
        await branch.act({"function": "add", "arguments": {"a": 2, "b": 3}})
        await branch.chat_and_record("second")
    restored = Branch.from_dict(as_json(branch.to_dict(mode="json")))
    assert isinstance(restored.chat_model, ScriptedModel)
    async with branch, restored:
        await branch.chat("third")
        await restored.chat("third")
    sent = original.calls[-1]
    again = restored.chat_model.calls[-1]
    assert again.messages == sent.messages and again.system == sent.system
    assert any(entry["role"] == "system" for entry in sent.messages)
    assert len(sent.messages) == 7  # system, 2 exchanges, a tool call and its result, "third"


def test_action_messages_survive_a_json_round_trip() -> None:
    """Tool requests and responses keep their link and their call ids."""
    request = ActionRequest(function="add", arguments={"a": 1}, call_id="c1")
    response = ActionResponse(
        function="add", arguments={"a": 1}, output=1, action_request_id=request.id, call_id="c1"
    )
    branch = Branch(chat_model="scripted", messages=[request, response])
    restored = Branch.from_dict(as_json(branch.to_dict(mode="json")))
    assert restored.messages.to_list() == [request, response]


conversations = st.lists(
    st.one_of([strategies.instances(cls) for cls in pride.messages.codec._MESSAGE_TYPES]),
    max_size=8,
    unique_by=lambda message: message.id,
)
log_entries = st.builds(
    LogEntry,
    kind=st.sampled_from(["model", "tool"]),
    name=st.text(max_size=10),
    started_at=st.floats(allow_nan=False, allow_infinity=False),
    duration_ms=st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    status=st.sampled_from(["ok", "error", "cancelled"]),
    turn_id=st.none() | st.uuids().map(str),
    input_tokens=st.integers(min_value=0, max_value=10**6),
    cost_usd=st.none() | st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    detail=strategies.json_objects,
)


@settings(max_examples=50)
@given(
    messages=conversations,
    metadata=strategies.json_objects,
    user=st.none() | st.text(max_size=10),
    name=st.none() | st.text(max_size=10),
    logs=st.lists(log_entries, max_size=3),
    distinct_parse=st.booleans(),
)
def test_json_round_trip_is_identical_for_random_conversations(
    messages: list[Any],
    metadata: dict[str, Any],
    user: str | None,
    name: str | None,
    logs: list[LogEntry],
    distinct_parse: bool,
) -> None:
    """Property: to_dict(json) -> JSON text -> from_dict -> to_dict(json) gives the same data."""
    branch = Branch(
        chat_model="scripted/chat",
        parse_model="openai/gpt-4o" if distinct_parse else None,
        messages=messages,
        metadata=metadata,
        user=user,
        name=name,
        logs=logs,
    )
    first = branch.to_dict(mode="json", include_log_config=True)
    text = json.dumps(first)
    second = Branch.from_dict(json.loads(text)).to_dict(mode="json", include_log_config=True)
    assert second == first
    assert json.dumps(second) == text
