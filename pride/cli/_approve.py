"""``pride chat``: a person decides on the tool calls a turn waits on.

A turn that reaches a call of a tool declared ``requires_approval`` (or one a
``before_tool_call`` hook defers) stops with
[`ApprovalRequired`][pride.ApprovalRequired]. The REPL then shows each pending
call, its tool and the arguments the model gave (hostile text: printed
through `shown_exactly`, so a hidden character is seen), and asks
``approve? [y/n]``. ``y`` approves it; ``n`` asks
for a reason, which the model sees in the call's result. Once every call is
decided the turn continues ([`Resume`][pride.Resume]) and its answer streams
as any reply does.

End of input (or Ctrl-C) at the question leaves the turn waiting: with
``--store`` it waits in the store across restarts, ``pride inspect`` lists
it, and the next ``pride chat`` on that store and agent asks again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from ..messages import Approve, Decision, Deny, PendingCall
from ._terminal import shown_exactly

__all__ = ["DEFAULT_DENIAL", "decide", "describe_call"]

DEFAULT_DENIAL = "denied in pride chat"
"""The reason the model sees when a person says no without giving one."""

_YES = ("y", "yes")
_NO = ("n", "no")

Ask = Callable[[str], Awaitable[str | None]]
"""Print a question and return the person's answer (None: input ended)."""


def describe_call(call: PendingCall) -> str:
    """``tool({"argument": ...})``, safe to print and exactly what will run:
    every character that could hide or disguise text is shown as an escape."""
    arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
    return shown_exactly(f"{call.function}({arguments})")


async def decide(
    pending: Sequence[PendingCall], ask: Ask, say: Callable[[str], None]
) -> dict[str, Decision] | None:
    """Ask about each pending call in turn; return the decisions by call id, or
    None when input ended before every call was decided (nothing is resolved)."""
    decisions: dict[str, Decision] = {}
    for call in pending:
        question = f"approve {describe_call(call)}? [y/n] "
        while True:
            answer = await ask(question)
            if answer is None:
                return None
            word = answer.strip().lower()
            if word in _YES:
                decisions[call.call_id] = Approve()
                break
            if word in _NO:
                reason = await ask("reason (the model sees it; empty for none): ")
                if reason is None:
                    return None
                decisions[call.call_id] = Deny(reason.strip() or DEFAULT_DENIAL)
                break
            say("please answer y or n")
    return decisions
