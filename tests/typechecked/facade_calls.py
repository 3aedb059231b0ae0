"""Checked by mypy (``make typecheck``), never run: the facade verbs' static signatures.

Each verb is a method of Branch with its command's parameters, so a type
checker sees and checks them. The deliberate mistakes below carry a
``type: ignore`` that mypy's strict mode reports as unused the day the verb
stops being checked: that is the test.
"""

from __future__ import annotations

import pride
from pride import ActionCall, Branch


async def correct_calls(branch: Branch) -> None:
    """Calls a type checker accepts: every parameter is the command's, plus timeout."""
    await branch.chat("hi", guidance="be brief", tools=False)
    await branch.chat_and_record("hi", sender="me")
    await branch.communicate("hi", num_parse_retries=2, clear_messages=True)
    await branch.operate("plan", reason=True, actions=True, max_rounds=2)
    await branch.parse("{}", max_retries=1, fuzzy_match=False)
    await branch.interpret("fix this", domain="maths")
    await branch.act(ActionCall("add", {"a": 1}), strategy="sequential")
    await branch.ReAct("think", max_extensions=1, return_analysis=True)
    await branch.call("summarise", style="short")
    await branch.chat("hi", timeout=3.0)
    async with branch.run("go", max_rounds=2) as items:
        async for _ in items:
            pass
    async with branch.ReActStream("think", max_extensions=0) as rounds:
        async for _ in rounds:
            pass


async def mistakes(branch: Branch) -> None:
    """Calls a type checker rejects (each ignore must stay needed)."""
    await branch.operate("plan", raeson=True)  # type: ignore[call-arg]
    await branch.parse(42)  # type: ignore[arg-type]
    await branch.chat("hi", max_rounds=2)  # type: ignore[call-arg]
    async with branch.run("go", timeout=1) as items:  # type: ignore[call-arg]
        del items


async def the_verb_is_its_command(branch: Branch) -> None:
    """What the verb does, spelled out: the same command, asked of the branch."""
    await pride.ask(branch, pride.Operate("plan", reason=True))
