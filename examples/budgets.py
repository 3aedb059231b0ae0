"""Budgets: bound a runaway loop, a spend and a team — runs on the scripted model.

``python examples/budgets.py``
"""

from __future__ import annotations

import json

import trio

import pride
from pride import Branch, Budget, BudgetExceeded, Chat, Session
from pride.llm import ScriptedModel, ScriptedReply, Usage as CallUsage

# A model that always wants another round: the runaway loop budgets are for.
ANOTHER_ROUND = json.dumps(
    {
        "analysis": "not done yet",
        "extension_needed": True,
        "reason": {"title": "more", "content": "one more round", "confidence_score": 0.5},
    }
)


def priced(text: str) -> ScriptedReply:
    """A reply reporting 120 output tokens and a cost of two cents."""
    return ScriptedReply(text, usage=CallUsage(input_tokens=40, output_tokens=120, cost_usd=0.02))


async def main() -> None:
    # 1. A ReAct loop asking for round after round stops at max_model_calls.
    looping = ScriptedModel(lambda request: ANOTHER_ROUND)
    async with Branch(name="looper", chat_model=looping) as branch:
        try:
            await branch.ReAct("plan it", max_extensions=50, budget=Budget(max_model_calls=4))
        except BudgetExceeded as exc:
            print(f"looper: {exc}")
        print(f"looper used {branch.usage.model_calls} model calls")

    # 2. A branch budget is a fresh allowance for each turn.
    spender = ScriptedModel(lambda request: priced("an answer"))
    async with Branch(chat_model=spender, budget=Budget(max_cost_usd=0.03)) as branch:
        for question in ("one", "two", "three"):
            await branch.chat(question)  # each turn spends $0.02 of its own $0.03
        print(f"three turns cost ${branch.usage.cost_usd:.2f} in all")

    # 3. A session's budget is one allowance shared by every member. The
    #    writer's reply takes the team past it: that turn ends, its reply unused.
    async with Session(name="team", budget=Budget(max_output_tokens=300)) as session:
        for name in ("planner", "researcher", "writer"):
            await session.spawn(Branch(name=name, chat_model=ScriptedModel([priced(name)])))
        for name in ("planner", "researcher", "writer"):
            try:
                await session.ask(name, Chat("your part, please"))
                print(f"{name}: done")
            except BudgetExceeded as exc:
                print(f"{name}: stopped ({exc.limit}: used {exc.used} of {exc.allowed})")
        print(f"the team used {session.usage.output_tokens} output tokens")

    # 4. A streamed reply is cut the moment its output runs past the allowance.
    chatty = ScriptedModel(["word " * 100], chunk_size=10)
    async with Branch(chat_model=chatty) as branch:
        shown = 0
        try:
            run = pride.Run("talk", budget=Budget(max_output_tokens=10))
            async with pride.stream(branch, run) as items:
                async for item in items:
                    if isinstance(item, str):
                        shown += len(item)
        except BudgetExceeded as exc:
            print(f"stream cut after {shown} characters: {exc.limit}")


if __name__ == "__main__":
    trio.run(main)
