"""The conversation behind ``data/store_before_issue32.json``: rows that pride wrote
before its store's rows went through the codec (issue 32), kept to prove that a
store on a user's disk still reads the same.

``python -m tests.store.stored_before`` rewrites the fixture with the code it runs
on; it was run on 17fd5c9 (the last commit with the store's own JSON encoder) and
must not be rerun on later code, or the fixture stops saying anything about the past.
"""

from __future__ import annotations

import datetime
import json
import math
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any
from uuid import UUID

import trio

from pride.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Reasoning,
    RoledMessage,
    System,
    unstructure,
)
from pride.store import BranchStore

FIXTURE = Path(__file__).parent / "data" / "store_before_issue32.json"
BRANCH = "ada"
BRANCH_ID = "00000000-0000-4000-8000-00000000a0a0"
PROJECTION: dict[str, Any] = {
    "name": BRANCH,
    "small": 1e-05,
    "large": 1e16,
    "text": "naïve – ok",
    "when": datetime.datetime(2026, 1, 2, 3, 4, 5),  # not JSON: stored as its str
    "odd": {1: math.inf},
}


def conversation() -> list[RoledMessage]:
    """Messages of every stored kind, with fixed ids and times, holding the values
    the two writers could write differently: float forms, non-ASCII text, numbers
    and keys strict JSON cannot carry, a lone surrogate, a subclass's row."""

    def ids(n: int) -> dict[str, Any]:
        return {"id": UUID(int=n), "created_at": 1_800_000_000.0 + n / 8}

    metadata = {"usage": {"input_tokens": 3, "output_tokens": 4}, "ratio": 0.1, "tiny": 5e-324}
    return [
        System(system_message="be brief", **ids(1)),
        Instruction(
            instruction="héllo ✓ \u2028 \x00 end",
            context={"n": [1, 2.5, -0.0, 1e300, 1e-07, True, None], "deep": {"a": {"b": [[]]}}},
            tool_schemas=({"name": "lookup", "parameters": {"type": "object"}},),
            **ids(2),
        ),
        AssistantResponse(assistant_response="echo: hello", metadata=metadata, **ids(3)),
        ActionRequest(function="lookup", arguments={"q": "x", "k": 10**18}, call_id="c1", **ids(4)),
        ActionResponse(
            function="lookup",
            arguments={"q": "x"},
            output={"rows": [1e16, "z"]},
            call_id="c1",
            **ids(5),
        ),
        Reasoning(provider="anthropic", reasoning="think", signature="sig", **ids(6)),
        # What strict JSON cannot carry: stored with the documented replacements.
        AssistantResponse(assistant_response="big", metadata={"x": 2**70}, **ids(7)),
        AssistantResponse(assistant_response="keys", metadata={1: "one"}, **ids(8)),
        AssistantResponse(
            assistant_response="when", metadata={"at": datetime.date(2026, 1, 2)}, **ids(9)
        ),
        Instruction(instruction="hi", tool_schemas=({"name": chr(0xDC80)},), **ids(10)),
        AssistantResponse(assistant_response="nan", metadata={"x": math.nan}, **ids(11)),
    ]


async def _write(path: Path) -> None:
    async with BranchStore(path) as store:
        await store.save_branch(BRANCH, BRANCH_ID, PROJECTION, conversation()[:3])
        store.append_all(BRANCH, conversation()[3:])
        await store.flush()


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch, "store.db")
        trio.run(_write, path)

        async def read() -> tuple[Any, Any]:
            async with BranchStore(path, read_only=True) as store:
                return await store.load(BRANCH), await store.load_messages(BRANCH)

        loaded, messages = trio.run(read)
        db = sqlite3.connect(path)
        try:
            dump = list(db.iterdump())
        finally:
            db.close()
    FIXTURE.write_text(
        json.dumps(
            {
                "sql": dump,
                "load": loaded,
                "messages": [unstructure(message) for message in messages],
            },
            indent=1,
            ensure_ascii=True,
        )
        + "\n"
    )
    print(f"wrote {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
