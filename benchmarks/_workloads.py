"""pride's side of the workloads shared with the reference-system comparison."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from benchmarks._harness import CollectorTime, run_concurrently
from pride import AssistantResponse, Branch, Chat, Instruction, ScriptedModel, ask


def scripted() -> ScriptedModel:
    """A scripted model answering every call at once with a fixed reply."""
    return ScriptedModel(lambda request: "ok")


def branch_with_history(messages: int, model: ScriptedModel | None = None) -> Branch:
    """A branch holding ``messages`` short recorded messages (instruction/answer pairs)."""
    branch = Branch(chat_model=model or scripted())
    for index in range(messages // 2):
        branch.messages.append(Instruction(instruction=f"question {index}"))
        branch.messages.append(AssistantResponse(assistant_response=f"answer {index}"))
    return branch


def turns_on(branch: Branch) -> Callable[[int], Awaitable[None]]:
    """``n`` sequential ``ask(branch, Chat("hi"))`` turns (Chat records nothing)."""

    async def run(n: int) -> None:
        command = Chat("hi")
        async with branch:
            for _ in range(n):
                await ask(branch, command)

    return run


def verb_turns_on(branch: Branch) -> Callable[[int], Awaitable[None]]:
    """``n`` sequential ``branch.chat("hi")`` turns: `turns_on` through the facade verb."""

    async def run(n: int) -> None:
        async with branch:
            for _ in range(n):
                await branch.chat("hi")

    return run


def fan_out(
    branches: int, collected: list[CollectorTime] | None = None
) -> Callable[[int], Awaitable[float]]:
    """About ``total`` turns spread over ``branches`` branches running concurrently.

    Returns the seconds per turn of the concurrent phase only (starting the
    actors is setup, not measured). With ``collected``, the garbage
    collector's share of that phase is appended to it, one per batch.
    """

    async def run(total: int) -> float:
        per_branch = max(1, total // branches)
        model = scripted()
        async with trio.open_nursery() as nursery:
            members = [Branch(chat_model=model) for _ in range(branches)]
            for branch in members:
                await nursery.start(branch.serve)

            async def worker(branch: Branch) -> None:
                command = Chat("hi")
                for _ in range(per_branch):
                    await ask(branch, command)

            elapsed = await run_concurrently(worker, members, collected)
            nursery.cancel_scope.cancel()
        return elapsed * total / (per_branch * branches)

    return run
