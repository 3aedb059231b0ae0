"""``pride inspect STORE [BRANCH]``: read a branch store (read-only, no lock: a store
in use by ``pride run`` reads fine) without changing anything in it.

Besides the branches (or one conversation) it lists the store's unfinished
turns, from the turn journal: those suspended until a person approves their
pending tool calls (with each call, to resolve by its id), and those a crash
interrupted (resumed, or abandoned by policy, when their branch is restored).
Everything read is hostile (a file pride did not just write): it is checked
as a restored branch checks it, and printed through `shown`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..durable import BranchJournal
from ..errors import StoreError
from ..messages import ActionRequest, ActionResponse, RoledMessage
from ..store import BranchStore, StoredBranch, StoredTurn
from ._startup import EXIT_USAGE, cannot_start, listed
from ._terminal import shown, shown_exactly

__all__ = ["EXIT_BAD_STORE", "inspect_store"]

EXIT_BAD_STORE = EXIT_USAGE
"""Exit status for a missing, corrupt or foreign store, or an unknown branch."""

_ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green", "action": "yellow"}


async def inspect_store(path: Path, branch: str | None, out: Console) -> int:
    """List the branches of the store at ``path``, or print one conversation.

    Returns:
        0, or `EXIT_BAD_STORE` after saying why in one line (`cannot_start`).
    """
    if not await trio.Path(path).exists():
        return cannot_start("inspect", f"no store at {path}")
    try:
        async with BranchStore(path, read_only=True) as store:
            if branch is None:
                _print_branches(out, path, await store.branches())
                _print_turns(out, await store.unfinished_turns())
                return 0
            if await store.load(branch) is None:
                names = listed(b.name for b in await store.branches())
                return cannot_start("inspect", f"no branch {branch!r} in {path} (stored: {names})")
            _print_conversation(out, branch, await store.load_messages(branch))
            _print_turns(out, await store.unfinished_turns(branch))
            return 0
    except StoreError as exc:
        return cannot_start("inspect", str(exc))


def _print_branches(out: Console, path: Path, branches: list[StoredBranch]) -> None:
    if not branches:
        out.print(f"{path}: no stored branches", markup=False)
        return
    table = Table(title=str(path), title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("id", no_wrap=True)
    table.add_column("messages", justify="right")
    table.add_column("last update", no_wrap=True)
    for stored in branches:
        table.add_row(
            Text(shown(stored.name)),
            shown(stored.branch_id),
            str(stored.message_count),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stored.updated_at)),
        )
    out.print(table)


def _print_conversation(out: Console, name: str, messages: list[RoledMessage]) -> None:
    out.print(Text(f"{shown(name)}: {len(messages)} messages", style="bold"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    for message in messages:
        if isinstance(message, ActionRequest):
            label = "tool call"
            text = f"{message.function}({json.dumps(dict(message.arguments), ensure_ascii=False)})"
        elif isinstance(message, ActionResponse):
            label = "tool result"
            text = f"{message.function} -> {message.result_text}"
        else:
            label, text = message.role, message.text
        grid.add_row(Text(label, style=_ROLE_STYLE.get(message.role, "")), Text(shown(text)))
    out.print(grid)


def _print_turns(out: Console, turns: list[StoredTurn]) -> None:
    """The unfinished turns, oldest first; nothing when there are none."""
    if not turns:
        return
    table = Table(title="unfinished turns", title_justify="left")
    table.add_column("turn", no_wrap=True)
    table.add_column("branch", style="bold", no_wrap=True)
    table.add_column("state")
    table.add_column("command", no_wrap=True)
    table.add_column("steps", justify="right")
    table.add_column("waiting on (call id: tool(arguments))")
    for stored in turns:
        # Read back as a restoring branch would: every field checked.
        waiting = BranchJournal(stored.branch_name).adopt(stored)
        if waiting is None:  # no valid turn id (logged)
            continue
        if waiting.problem is not None:
            state = Text(f"cannot be resumed: {shown(waiting.problem)}", style="red")
        elif waiting.status == "suspended":
            state = Text("suspended: waits for approval", style="yellow")
        else:
            state = Text("interrupted: resumes when its branch is restored", style="yellow")
        command = type(waiting.command).__name__ if waiting.command is not None else "?"
        pending = "\n".join(  # what a person decides on: nothing hidden
            shown_exactly(
                f"{call.call_id}: {call.function}"
                f"({json.dumps(dict(call.arguments), ensure_ascii=False)})"
            )
            for call in waiting.pending()
        )
        table.add_row(
            str(waiting.turn_id),
            Text(shown(stored.branch_name)),
            state,
            command,
            str(len(waiting.steps)),
            Text(pending),
        )
    out.print(table)
