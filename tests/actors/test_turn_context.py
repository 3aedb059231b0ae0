"""The turn context: ids, the model snapshot, phases (ADR-0018 D1/D3)."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Chat, RunEnd, RunStart, ScriptedModel
from tests.helpers import Gate, Recorder, echo_model


async def test_fresh_uuid4_turn_id_per_turn() -> None:
    """Each top-level turn gets a new version-4 turn id, carried by its signals and reply."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        replies = [await pride.send(branch, Chat(f"q{i}")) for i in range(3)]
        for reply in replies:
            await reply.result()
    starts = recorder.of(RunStart)
    ids = [signal.turn_id for signal in starts]
    assert len(set(ids)) == 3
    assert all(isinstance(turn_id, uuid.UUID) and turn_id.version == 4 for turn_id in ids)
    assert [reply.turn_id for reply in replies] == ids
    assert [signal.turn_id for signal in recorder.of(RunEnd)] == ids


async def test_model_snapshot_taken_when_the_turn_starts() -> None:
    """A model change while a turn waits in the mailbox applies to that turn when it starts."""
    gate = Gate()
    later = ScriptedModel(["from the later model"])
    async with Branch(chat_model=gate.model) as branch:
        first = await pride.send(branch, Chat("one"))
        second = await pride.send(branch, Chat("two"))
        await gate.started.wait()
        branch.chat_model = later  # the running turn keeps its snapshot
        gate.release("one")
        assert await first.result() == "reply to one"
        assert await second.result() == "from the later model"


async def test_per_call_override_never_changes_the_branch_model() -> None:
    """A command's chat_model is used for that turn only."""
    default = echo_model()
    override = ScriptedModel(["override"])
    async with Branch(chat_model=default) as branch:
        assert await branch.chat("x", chat_model=override) == "override"
        assert branch.chat_model is default
        assert await branch.chat("y") == "re: y"


async def test_failing_override_leaves_configuration_untouched() -> None:
    """An invalid per-call model fails the turn and leaves the branch model as it was."""
    recorder = Recorder()
    default = echo_model()
    async with Branch(chat_model=default, observer=recorder) as branch:
        with pytest.raises((TypeError, ValueError)):
            await branch.chat("x", chat_model=42)
        assert branch.chat_model is default
        assert await branch.chat("y") == "re: y"
    assert recorder.kinds()[:2] == ["RunStart", "RunFailed"]


async def test_phases_move_forward() -> None:
    """Inside the body the phase is active; at the terminal it is finalizing; afterwards closed."""
    seen: dict[str, str] = {}
    contexts = []

    def on_signal(signal: object) -> None:
        if isinstance(signal, RunEnd):
            assert branch._active_turn is not None
            seen["terminal"] = branch._active_turn.phase

    async def probe(branch: Branch) -> str:
        scope = pride.current_turn()
        assert scope is not None
        contexts.append(scope.context)
        seen["body"] = scope.context.phase
        return "done"

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        branch.register_operation("probe", probe)
        assert await branch.call("probe") == "done"
    assert seen == {"body": "active", "terminal": "finalizing"}
    assert contexts[0].phase == "closed"
    with pytest.raises(RuntimeError):
        contexts[0].advance("active")


async def test_current_turn_is_none_outside_turns() -> None:
    """current_turn() is None in code that is not part of a turn."""
    assert pride.current_turn() is None
    async with Branch(chat_model=echo_model()) as branch:
        await branch.chat("hi")
        assert pride.current_turn() is None


async def test_turn_usage_reaches_run_end() -> None:
    """RunEnd reports the usage and the number of model calls of its turn."""
    recorder = Recorder()
    model = ScriptedModel(
        [pride.llm.ScriptedReply("hi", usage=pride.llm.Usage(7, 3, cached_tokens=1, cost_usd=0.5))]
    )
    async with Branch(chat_model=model, observer=recorder) as branch:
        await branch.chat("hello")
    (end,) = recorder.of(RunEnd)
    assert (end.input_tokens, end.output_tokens, end.cached_tokens) == (7, 3, 1)
    assert end.total_cost_usd == 0.5
    assert end.model_calls == 1
    assert end.duration_ms >= 0


async def test_last_context_report_is_none_after_plain_turns() -> None:
    """A turn without context providers publishes None as the last report."""
    async with Branch(chat_model=echo_model()) as branch:
        branch._last_context_report = "stale"
        await branch.chat("hi")
        assert branch.last_context_report is None


async def test_gate_helper_blocks_until_released(autojump_clock: trio.testing.MockClock) -> None:
    """Sanity check of the test gate: an unreleased call stays blocked."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        with trio.move_on_after(5):
            await branch.chat("never")
        assert gate.events == [("start", "never")]


def test_the_context_holds_only_what_adr_0018_gives_a_turn() -> None:
    """TurnExecutionContext carries ADR-0018's fields and no runtime internals: the
    command, usage, the turn's task groups and the journal are the runtime's
    (TurnState), never handed to user code. ADR-0018's signal and nested task sets
    are those task groups."""
    import attrs

    from pride.actors.turn import TurnExecutionContext

    fields = [field.name for field in attrs.fields(TurnExecutionContext)]
    assert fields == [
        "turn_id",
        "model",
        "owner_task",
        "phase",
        "provider_blocks",
        "provider_report",
        "control",
    ]
    public = {name for name in dir(TurnExecutionContext) if not name.startswith("_")}
    assert public == {*fields, "advance"}
    assert "__slots__" in vars(TurnExecutionContext)  # nothing can be added at run time
