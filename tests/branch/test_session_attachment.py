"""ADR-0016 D4: session references attach and detach without taking conversation ownership."""

from __future__ import annotations

import uuid

import attrs

import pride
from pride import Attach, Branch, Detach, Instruction
from pride.memory import InMemoryStore
from pride.operations.registry import OperationManager
from tests.helpers import Recorder, echo_model


@attrs.define
class Caps:
    note: str


class Static:
    async def provide(self, branch: Branch, instruction: Instruction) -> str:
        return "ctx"


async def shared_op(branch: Branch) -> str:
    return "from the session"


def session_refs(**overrides: object) -> Attach:
    """An Attach like a session sends (without an owner, so the private supervisor can stop)."""
    operations = OperationManager()
    operations.register("shared_op", shared_op)
    fields: dict[str, object] = {
        "owner_name": "session",
        "observer": Recorder(),
        "operations": operations,
        "memory": InMemoryStore(),
    }
    fields.update(overrides)
    return Attach(**fields)  # type: ignore[arg-type]


async def test_an_unclaimed_branch_adopts_the_session_memory_default() -> None:
    """A branch that never read its memory adopts the session's store on attachment."""
    attach = session_refs()
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, attach)
        assert branch.memory is attach.memory


async def test_reading_memory_before_inclusion_counts_as_adopting() -> None:
    """Reading branch.memory first claims a store: later inclusion does not replace it."""
    async with Branch(chat_model=echo_model()) as branch:
        mine = branch.memory
        await pride.ask(branch, session_refs())
        assert branch.memory is mine


async def test_an_explicit_store_is_never_replaced_by_a_session_default() -> None:
    """A constructor store wins over any session default."""
    explicit = InMemoryStore()
    async with Branch(chat_model=echo_model(), memory=explicit) as branch:
        await pride.ask(branch, session_refs())
        assert branch.memory is explicit


async def test_an_adopted_store_stays_after_removal_and_reparenting() -> None:
    """A session-adopted store stays with the branch after Detach and a new Attach."""
    first, second = session_refs(), session_refs()
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, first)
        await pride.ask(branch, Detach())
        assert branch.memory is first.memory
        await pride.ask(branch, second)
        assert branch.memory is first.memory


async def test_removal_keeps_the_conversation_and_branch_scoped_state() -> None:
    """Detach keeps messages, models, tools, logs, metadata, providers, capabilities, memory."""

    def add(a: int) -> int:
        """Add nothing."""
        return a

    model = echo_model()
    async with Branch(chat_model=model, system="s", tools=[add], metadata={"k": "v"}) as branch:
        await pride.ask(branch, session_refs())
        branch.providers.register(Static(), name="ctx")
        branch.grant_capabilities(Caps)
        await branch.chat_and_record("hi")
        memory = branch.memory
        messages = branch.messages.to_list()
        await pride.ask(branch, Detach())
        assert branch.messages.to_list() == messages and len(messages) == 3
        assert branch.chat_model is model and branch.parse_model is model
        assert branch.acts.names == ("add",) and len(branch.logs) == 1
        assert branch.metadata == {"k": "v"} and branch.providers.names == ["ctx"]
        assert branch.capabilities is not None and branch.memory is memory


async def test_removal_removes_access_to_session_registered_operations() -> None:
    """Detach replaces the shared registry: session operations are no longer reachable."""
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, session_refs())
        assert await branch.call("shared_op") == "from the session"
        await pride.ask(branch, Detach())
        assert branch.get_operation("shared_op") is None
        assert "shared_op" not in branch.operations


async def test_attachments_reach_the_branch_between_turns_and_detach_clears_them() -> None:
    """Attach wires owner and observer; Detach clears them; the conversation is untouched."""
    recorder = Recorder()
    owner = uuid.uuid4()
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, session_refs(owner_id=owner, observer=recorder))
        assert branch.owner_id == owner
        await branch.chat_and_record("hi")
        assert "MessageAdded" in recorder.kinds()
        await pride.ask(branch, Detach())
        assert branch.owner_id is None
        seen = len(recorder.signals)
        await branch.chat_and_record("again")
        assert len(recorder.signals) == seen
        assert len(branch.messages) == 4


async def test_attachments_are_excluded_from_serialisation_and_cloning() -> None:
    """Observer, hooks, ownership and shared operations never reach to_dict or a clone."""
    recorder = Recorder()
    owner = uuid.uuid4()
    async with Branch(chat_model=echo_model()) as branch:
        await pride.ask(branch, session_refs(owner_id=owner, observer=recorder))
        data = branch.to_dict(mode="json")
        clone = branch.clone()
        await pride.ask(branch, Detach())
    assert str(owner) not in str(data) and "session" not in str(data)
    assert clone.owner_id is None and clone.get_operation("shared_op") is None
    seen = len(recorder.signals)
    clone.add_message(Instruction(instruction="quiet"))
    assert len(recorder.signals) == seen
