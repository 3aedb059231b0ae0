"""Issue 19, done-when: ``kill -9`` after each step of a ReAct turn, restart, resume.

Each test runs ``pride run`` twice on one store: the first process gets the
request and kills itself at one exact point (`tests.durable.app`); the
second starts with no request at all, resumes the turn from the journal and
answers it on the request id that started it. Asserted every time: the
scripted model received exactly the calls the journal did not hold, each
tool ran exactly once over both processes (counted in a file the tool
writes), the stored conversation equals the one an uncrashed run stores,
and the second process saw one RunStart (resumed, with the turn's id) and
one terminal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durable.app import ANSWER
from tests.durable.support import (
    REQUEST,
    history,
    history_sync,
    journal,
    journaled_model_steps,
    killed,
    pride_run,
    pride_run_sync,
    records,
)

CALLS = ["plan", "analyse", "answer"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """The conversation an uncrashed run stores."""
    directory = tmp_path_factory.mktemp("reference")
    answers = pride_run_sync(directory, 1, [REQUEST])
    assert answers == [{"id": "r1", "ok": True, "result": ANSWER}]
    assert [r["call"] for r in records(directory, "calls-1.jsonl")] == CALLS
    return history_sync(directory / "store.db")


# Each point is just after a step: its record is committed, the next step has not begun
# (or, for "final", the last step is done but not yet committed).
AFTER_STEP = {
    "after the first model call": "hook:weather",
    "after the first tool": "hook:temperature",
    "after the second tool": "model:2",
    "after the second model call": "model:3",
    "after the last model call, before the commit": "final",
}


@pytest.mark.parametrize("kill", AFTER_STEP.values(), ids=list(AFTER_STEP))
async def test_issue19_kill_9_after_each_step_resumes_without_repeating_it(
    tmp_path: Path, kill: str, reference: list[tuple[str, str]]
) -> None:
    status, answers = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL=kill)
    assert killed(status) and answers == []
    [turn] = await journal(tmp_path / "store.db")
    assert turn.status == "running"
    done = journaled_model_steps(turn)
    first_run = records(tmp_path, "calls-1.jsonl")

    status, answers = await pride_run(tmp_path, 2, [])
    assert status == 0
    assert answers == [{"id": "r1", "ok": True, "result": ANSWER}]
    # exactly the calls the journal did not hold, none it held
    assert [r["call"] for r in records(tmp_path, "calls-2.jsonl")] == CALLS[done:]
    assert [r["call"] for r in first_run][:done] == CALLS[:done]
    assert sorted(r["tool"] for r in records(tmp_path, "tools.jsonl")) == [
        "temperature",
        "weather",
    ]
    assert await history(tmp_path / "store.db") == reference
    assert await journal(tmp_path / "store.db") == []
    started = records(tmp_path, "signals-1.jsonl")[0]
    assert records(tmp_path, "signals-2.jsonl") == [
        {"type": "RunStart", "turn_id": started["turn_id"], "resumed": True},
        {"type": "RunEnd", "turn_id": started["turn_id"]},
    ]


async def test_issue19_kill_9_after_the_commit_leaves_nothing_to_resume(
    tmp_path: Path, reference: list[tuple[str, str]]
) -> None:
    """Killed once the turn is committed (before its answer): the turn is whole in
    the store and gone from the journal; a restart runs nothing again."""
    status, _ = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL="committed")
    assert killed(status)
    assert await journal(tmp_path / "store.db") == []
    status, answers = await pride_run(tmp_path, 2, [])
    assert status == 0 and answers == []
    assert records(tmp_path, "calls-2.jsonl") == []
    assert len(records(tmp_path, "tools.jsonl")) == 2
    assert await history(tmp_path / "store.db") == reference


async def test_issue19_kill_9_during_the_first_model_call_journals_nothing(
    tmp_path: Path,
) -> None:
    """Before its first step completes a turn has done nothing worth keeping: no
    journal entry, nothing stored, nothing resumed (the caller sends it again)."""
    status, _ = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL="model:1")
    assert killed(status)
    assert await journal(tmp_path / "store.db") == []
    status, answers = await pride_run(tmp_path, 2, [])
    assert status == 0 and answers == []
    assert await history(tmp_path / "store.db") == []


async def test_issue19_a_tool_that_is_not_idempotent_is_never_run_twice(tmp_path: Path) -> None:
    """Killed after ``weather`` did its work and before it returned: the resumed turn
    does not run it again; the model is told the call was interrupted, and the
    turn goes on (``temperature`` runs, once)."""
    status, _ = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL="ran:weather")
    assert killed(status)
    status, answers = await pride_run(tmp_path, 2, [])
    assert status == 0
    assert answers == [{"id": "r1", "ok": True, "result": ANSWER}]
    assert [r["tool"] for r in records(tmp_path, "tools.jsonl")] == ["weather", "temperature"]
    [weather] = [
        text
        for role, text in await history(tmp_path / "store.db")
        if role == "action" and "InterruptedCall" in text
    ]
    assert "weather" in weather and "not run again" in weather


async def test_issue19_an_idempotent_tool_interrupted_by_a_crash_runs_again(
    tmp_path: Path, reference: list[tuple[str, str]]
) -> None:
    """The same crash with idempotent tools: the call simply runs again (twice in
    all, which its declaration allows), and the turn ends as an uncrashed one."""
    options = {"PRIDE_TEST_IDEMPOTENT": "1"}
    status, _ = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL="ran:weather", **options)
    assert killed(status)
    status, answers = await pride_run(tmp_path, 2, [], **options)
    assert answers == [{"id": "r1", "ok": True, "result": ANSWER}]
    tools = [r["tool"] for r in records(tmp_path, "tools.jsonl")]
    assert tools == ["weather", "weather", "temperature"]
    assert await history(tmp_path / "store.db") == reference


async def test_issue19_the_abandon_policy_fails_the_interrupted_turn(tmp_path: Path) -> None:
    """``Durability(resume="abandon")``: the restarted process ends the turn with
    TurnAbandoned, answered on its request id; nothing of it runs again and the
    conversation is as it was before the turn."""
    options = {"PRIDE_TEST_POLICY": "abandon"}
    status, _ = await pride_run(tmp_path, 1, [REQUEST], PRIDE_TEST_KILL="model:2", **options)
    assert killed(status)
    status, answers = await pride_run(tmp_path, 2, [], **options)
    assert status == 0
    [answer] = answers
    assert answer["id"] == "r1" and answer["ok"] is False
    assert answer["error"]["type"] == "TurnAbandoned"
    assert "abandon" in answer["error"]["message"]
    assert records(tmp_path, "calls-2.jsonl") == []
    assert len(records(tmp_path, "tools.jsonl")) == 2
    assert await history(tmp_path / "store.db") == []
    assert await journal(tmp_path / "store.db") == []
    signals = records(tmp_path, "signals-2.jsonl")
    assert [s["type"] for s in signals] == ["RunStart", "RunFailed"]
    assert signals[0]["resumed"] is True
