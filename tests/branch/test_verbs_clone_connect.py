"""ADR-0016 D5: verbs delegate; operation lookup is attribute-first; clone; connect."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest

import pride
from pride import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Attach,
    Branch,
    BranchNotRunning,
    Detach,
    Instruction,
    ScriptedModel,
    System,
    UnknownOperation,
    iModel,
)
from pride.llm import ToolCall
from pride.memory import InMemoryStore
from pride.operations.registry import OperationManager
from tests.helpers import Recorder, echo_model


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@attrs.define
class Caps:
    note: str


class Static:
    async def provide(self, branch: Branch, instruction: Instruction) -> str:
        return "ctx"


def conversation() -> list[Any]:
    request = ActionRequest(function="add", arguments={"a": 1}, call_id="c1", sender="x")
    return [
        System(system_message="Be brief."),
        Instruction(instruction="sum", sender="user", recipient="x"),
        request,
        ActionResponse(function="add", output=1, action_request_id=request.id, call_id="c1"),
        AssistantResponse(assistant_response="1", sender="x", recipient="user"),
    ]


def source_branch(**kwargs: Any) -> Branch:
    return Branch(
        chat_model=kwargs.pop("chat_model", echo_model()),
        user="ada",
        name="source",
        messages=conversation(),
        tools=[add],
        metadata={"private": True},
        **kwargs,
    )


# ---------------------------------------------------------------------- clone


def test_the_system_and_every_message_are_cloned_with_new_ids() -> None:
    """A clone has its own id and a copy of every message (system included) under new ids."""
    source = source_branch()
    clone = source.clone()
    assert clone.id != source.id and clone is not source
    assert len(clone.messages) == len(source.messages) == 5
    assert isinstance(clone.messages[0], System) and clone.system is clone.messages[0]
    for copy, original in zip(clone.messages, source.messages, strict=True):
        assert type(copy) is type(original) and copy.id != original.id
        assert copy.text == original.text and copy.created_at == original.created_at


def test_cloned_sender_and_recipient_are_rewritten_for_the_new_branch() -> None:
    """Every cloned message comes from the source (or ``sender``) and goes to the clone."""
    source = source_branch()
    clone = source.clone()
    assert {(m.sender, m.recipient) for m in clone.messages} == {(str(source.id), str(clone.id))}
    other = uuid.uuid4()
    assert {m.sender for m in source.clone(sender=other).messages} == {str(other)}
    assert {m.sender for m in source.clone(sender="planner").messages} == {"planner"}
    with pytest.raises(TypeError, match="sender"):
        source.clone(sender=42)  # type: ignore[arg-type]


def test_cloned_action_responses_point_at_the_cloned_requests() -> None:
    """The request/response link survives the new ids."""
    clone = source_branch().clone()
    request, response = clone.messages[2], clone.messages[3]
    assert isinstance(response, ActionResponse) and response.action_request_id == request.id


def test_registered_tools_are_passed_into_the_clone() -> None:
    """The clone's action manager holds the same tools."""
    source = source_branch()
    clone = source.clone()
    assert clone.acts.names == ("add",) and clone.tools["add"] is source.tools["add"]
    assert clone.acts is not source.acts


def test_models_are_reused_and_a_distinct_parse_model_stays_distinct() -> None:
    """Model objects are reused; aliased stays aliased, distinct stays distinct."""
    chat = echo_model()
    aliased = source_branch(chat_model=chat).clone()
    assert aliased.chat_model is chat and aliased.parse_model is chat
    parse = echo_model()
    distinct = source_branch(chat_model=chat, parse_model=parse).clone()
    assert distinct.chat_model is chat and distinct.parse_model is parse


def test_the_clone_gets_clone_from_metadata_and_the_source_user() -> None:
    """metadata is {"clone_from": id, user, created_at, progression}; the user carries over."""
    source = source_branch()
    clone = source.clone()
    assert clone.user == "ada"
    assert clone.metadata == {
        "clone_from": {
            "id": str(source.id),
            "user": "ada",
            "created_at": source.created_at,
            "progression": [str(m.id) for m in source.messages],
        }
    }
    assert clone.to_dict(mode="json")["metadata"] == clone.metadata


async def test_live_and_session_state_is_not_copied() -> None:
    """Logs, log config, memory, providers, report, capabilities, operations, wiring: not copied."""
    recorder = Recorder()

    async def summarise(branch: Branch) -> str:
        return "s"

    source = source_branch(log_config={"capacity": 3, "include_content": True})
    async with source:
        source.providers.register(Static(), name="ctx")
        await source.chat("hi")
        source.grant_capabilities(Caps, prompt=False)
        source.register_operation("summarise", summarise)
        memory = source.memory
        await pride.ask(source, Attach(observer=recorder, memory=InMemoryStore()))
        clone = source.clone()
        await pride.ask(source, Detach())
    assert len(source.logs) == 1 and len(clone.logs) == 0
    assert clone.logs.config.capacity != 3
    assert clone.memory is not memory
    assert not clone.providers and clone.last_context_report is None
    assert source.last_context_report is not None
    assert clone.capabilities is None and clone.get_operation("summarise") is None
    assert clone.owner_id is None
    seen = len(recorder.signals)
    clone.add_message(Instruction(instruction="quiet"))
    assert len(recorder.signals) == seen


async def test_a_clone_is_a_new_actor_that_must_be_started() -> None:
    """A clone of a running branch is not running: verbs raise BranchNotRunning until started."""
    async with source_branch() as source:
        clone = source.clone()
        assert not clone.running
        with pytest.raises(BranchNotRunning):
            await clone.chat("hi")
        async with clone:
            assert await clone.chat("hi") == "re: hi"
        assert source.running


async def test_a_clone_sends_the_same_rendered_history() -> None:
    """Rewritten ids and addresses do not change what the model sees."""
    source = source_branch(chat_model=echo_model())
    clone = source.clone()
    clone.chat_model = echo_model()
    async with source, clone:
        await source.chat("next")
        await clone.chat("next")
    assert source.chat_model.calls[-1].messages == clone.chat_model.calls[-1].messages  # type: ignore[attr-defined]


async def test_aclone_is_clone_after_a_checkpoint() -> None:
    """aclone gives the same result as clone, asynchronously."""
    source = source_branch()
    clone = await source.aclone(sender="async")
    assert [m.text for m in clone.messages] == [m.text for m in source.messages]
    assert {m.sender for m in clone.messages} == {"async"}


# -------------------------------------------------------- operation registry


async def test_register_operation_makes_a_call_runnable() -> None:
    """A registered ``async def op(branch, **kw)`` runs as a turn through Call."""

    async def shout(branch: Branch, text: str) -> str:
        return text.upper()

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("shout", shout)
        assert branch.get_operation("shout") is shout
        assert await branch.call("shout", text="hi") == "HI"
        assert await pride.ask(branch, pride.Call("shout", text="yo")) == "YO"


def test_duplicate_names_fail_unless_update() -> None:
    """Registering a taken name raises ValueError; update=True replaces it."""

    async def one(branch: Branch) -> int:
        return 1

    async def two(branch: Branch) -> int:
        return 2

    branch = Branch(chat_model="scripted")
    branch.register_operation("op", one)
    with pytest.raises(ValueError, match="already registered"):
        branch.register_operation("op", two)
    branch.register_operation("op", two, update=True)
    assert branch.get_operation("op") is two


def test_sync_functions_are_rejected() -> None:
    """Only async functions can be operations."""

    def sync(branch: Branch) -> int:
        return 1

    with pytest.raises(TypeError, match="async"):
        Branch(chat_model="scripted").register_operation("sync", sync)


def test_get_operation_is_attribute_first() -> None:
    """A Branch attribute wins over the registry; unknown names give None."""
    branch = Branch(chat_model="scripted")
    assert branch.get_operation("chat") == branch.chat
    assert branch.get_operation("nothing_here") is None


async def test_a_registry_entry_cannot_shadow_an_attribute() -> None:
    """A shared registry entry named like an attribute is never reached: the attribute wins."""
    operations = OperationManager()

    async def chat(branch: Branch, **kw: Any) -> str:
        return "shadow"

    operations.register("chat", chat)
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, Attach(operations=operations))
        assert branch.get_operation("chat") == branch.chat
        assert await branch.call("chat", instruction="hi") == "re: hi"


async def test_an_attach_with_the_branchs_own_registry_is_refused_whole() -> None:
    """Bad input: a registry cannot stand behind itself; nothing of that Attach
    applies and the branch goes on serving with its own operations."""

    async def op(branch: Branch) -> str:
        return "mine"

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("op", op)
        with pytest.raises(ValueError, match="behind itself"):
            await pride.ask(branch, Attach(owner_name="s", operations=branch.operations))
        assert branch.owner_id is None and branch.operations.shared is None
        assert await branch.call("op") == "mine"


@pytest.mark.parametrize("name", ["chat", "memory", "messages", "name", "to_dict", "id"])
def test_register_operation_rejects_a_name_that_shadows_an_attribute(name: str) -> None:
    """Branch.register_operation refuses names attribute-first lookup could never reach."""

    async def op(branch: Branch) -> None:
        return None

    branch = Branch(chat_model="scripted")
    with pytest.raises(ValueError, match="attribute"):
        branch.register_operation(name, op)
    assert branch._memory is None  # checking "memory" did not claim a store


async def test_calling_an_unknown_operation_raises_unknown_operation() -> None:
    """Call with a name no attribute or registry has fails with UnknownOperation."""
    async with Branch(chat_model=echo_model()) as branch:
        with pytest.raises(UnknownOperation):
            await branch.call("missing")


# -------------------------------------------------------------------- connect


async def test_connect_wraps_a_model_as_a_tool_the_model_can_call() -> None:
    """connect registers a tool that asks the other model and returns its reply."""
    expert = ScriptedModel(lambda request: f"expert says: {request.messages[-1]['content']}")
    planner = ScriptedModel([ToolCall("expert", {"instruction": "2+2?"}), "done"])
    async with Branch(chat_model=planner) as branch:
        tool = branch.connect(imodel=expert, name="expert", description="Ask the expert.")
        assert branch.tools["expert"] is tool and tool.description == "Ask the expert."
        assert tool.schema()["parameters"]["required"] == ["instruction"]
        await branch.operate("plan", actions=True)
    (response,) = [m for m in branch.messages if isinstance(m, ActionResponse)]
    assert response.output == "expert says: 2+2?"
    assert expert.calls[0].messages == [{"role": "user", "content": "2+2?"}]


def test_connect_forwards_its_defaults_to_the_new_model() -> None:
    """queue_capacity 100 and capacity_refresh_time 60 s (and the rest) reach the iModel."""
    branch = Branch(chat_model="scripted")
    tool = branch.connect(model="openai/gpt-4o-mini", limit_requests=5, temperature=0.1)
    model = tool.function.imodel  # type: ignore[attr-defined]
    assert isinstance(model, iModel)
    assert (model.provider, model.model) == ("openai", "gpt-4o-mini")
    assert model.queue_capacity == 100 and model.capacity_refresh_time == 60
    assert model.limit_requests == 5 and model.request_options == {"temperature": 0.1}
    assert tool.name == "openai_gpt-4o-mini"


def test_connect_names_must_be_unique_unless_update() -> None:
    """A second tool of the same name fails unless update=True."""
    branch = Branch(chat_model="scripted")
    branch.connect(imodel=echo_model(), name="helper")
    with pytest.raises(ValueError, match="already registered"):
        branch.connect(imodel=echo_model(), name="helper")
    branch.connect(imodel=echo_model(), name="helper", description="v2", update=True)
    assert branch.tools["helper"].description == "v2"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"endpoint": "embed", "model": "scripted"},
        {"imodel": echo_model(), "provider": "openai"},
        {"imodel": echo_model(), "temperature": 0},
    ],
)
def test_connect_rejects_conflicting_or_unsupported_arguments(kwargs: dict[str, Any]) -> None:
    """Another endpoint, or imodel together with configuration, is a ValueError."""
    with pytest.raises(ValueError):
        Branch(chat_model="scripted").connect(**kwargs)
