"""A supervisor tree of three cooperating branches — runs on the scripted model.

``python examples/supervisor_tree.py``

::

    studio (one_for_one)
    ├── planner                 asks the others by name from inside its turn
    └── desk (one_for_all)      a child session
        ├── researcher
        └── critic              escalates once: the desk restarts both workers

The root observes the whole tree: child sessions pass their signals up.
"""

from __future__ import annotations

import trio

import pride
from pride import Branch, ChatAndRecord, Escalate, ScriptedModel, Session


def last_user_text(request: pride.llm.ModelRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user" and isinstance(message["content"], str):
            return message["content"]
    return ""


def researcher_model() -> ScriptedModel:
    return ScriptedModel(
        lambda request: f"three facts on {last_user_text(request).removeprefix('Research ')}"
    )


class Critic:
    """Finds its own state untrustworthy the first time it is consulted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: pride.llm.ModelRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            raise Escalate("the critic lost its notes")
        return f"looks sound, but check the sources of '{last_user_text(request)}'"


async def plan(branch: Branch, topic: str) -> str:
    """The planner's operation: consult the desk by name, then write the plan into its history."""
    facts = await pride.ask("researcher", ChatAndRecord(f"Research {topic}"))
    try:
        review = await pride.ask("critic", ChatAndRecord(facts))
    except Escalate as crash:  # answered with the crash; its session restarts it
        print(f"    planner: the critic crashed ({crash}); asking again")
        review = await pride.ask("critic", ChatAndRecord(facts))
    return str(await branch.chat_and_record(f"Plan a talk on {topic}: {facts}; {review}"))


def show(signal: pride.Signal) -> None:
    if isinstance(signal, pride.MessageAdded):
        print(f"    [{signal.branch_name}] {signal.message.role}: {signal.message.text}")
    elif isinstance(signal, pride.BranchStopped | pride.BranchRestarted | pride.SessionFailed):
        detail = getattr(signal, "reason", "") or getattr(signal, "cause", "")
        print(f"  ~ {type(signal).__name__} {signal.branch_name}: {detail}")


async def main() -> None:
    async with Session(name="studio") as studio:
        studio.observe(handler=show)
        studio.register_operation("plan", plan)
        await studio.spawn(
            Branch(name="planner", chat_model=ScriptedModel(lambda r: "a plan in three parts"))
        )
        desk = await studio.spawn_session("desk", strategy="one_for_all")
        await desk.spawn(Branch(name="researcher", chat_model=researcher_model()))
        await desk.spawn(Branch(name="critic", chat_model=ScriptedModel(Critic())))

        print("the planner consults the desk by name:")
        result = await studio.run_operation("plan", topic="structured concurrency")
        print(f"  result: {result}")
        stats = studio.statistics()
        print(
            f"  tree: {stats.branches} branches in {stats.sessions + 1} sessions, "
            f"{stats.turns_done} turns done, {stats.turns_failed} failed, "
            f"{stats.restarts} restart(s)"
        )
        print("leaving the block stops the tree children-first, in reverse start order:")


if __name__ == "__main__":
    trio.run(main)
