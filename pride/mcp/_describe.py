"""What an MCP client's model is told about each branch it can ask.

A client model picks a tool by its description alone, so "ask the agent
'critic'" for every branch leaves it guessing. Each ``ask_<name>`` tool says
what the application says about its branch: ``metadata["description"]`` when
the application gave one (``Branch(..., metadata={"description": ...})``),
else the branch's own system message, which says what the agent is for. Either
is the application's own text (trusted), shortened to `MAX_ABOUT` characters
and put on one line, since it is read by another model among many tools.
"""

from __future__ import annotations

from typing import Any

from ..messages.coerce import PRIDE_SYSTEM_MESSAGE

__all__ = ["MAX_ABOUT", "ask_description"]

MAX_ABOUT = 600
"""Characters of a branch's own description kept in its tool's description."""


def _about(branch: Any) -> str | None:
    given = branch.metadata.get("description")
    if isinstance(given, str) and given.strip():
        return given
    system = branch.system
    if system is None:
        return None
    # pride's own preamble, when the branch asked for it, says nothing of this agent.
    text = system.system_message.replace(PRIDE_SYSTEM_MESSAGE, "")
    return text if text.strip() else None


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= MAX_ABOUT:
        return flat
    return flat[: MAX_ABOUT - 1].rstrip() + "…"


def ask_description(branch: Any) -> str:
    """The description of the ``ask_<name>`` tool of ``branch``."""
    about = _about(branch)
    intro = f"Ask the agent {branch.name!r}"
    intro += f", described by its application as: {_one_line(about)}" if about else "."
    if about and not intro.endswith((".", "!", "?", "…")):
        intro += "."
    return (
        f"{intro} Give it an instruction in plain language; it answers in one turn of "
        "its own conversation, which it keeps between calls (it remembers what you "
        "asked before)."
    )
