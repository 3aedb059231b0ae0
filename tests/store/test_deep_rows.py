"""A row the store writes is a row it reads back, however deeply its data nests.

The writer's check of "strict JSON as it is" (``is_plain``) did not count an
empty container as a level, where the reader (``parse_json``, at most 100
levels) does. So data 101 levels deep whose deepest container was empty was
written as it was, and never read back: a model that gave a tool 99 levels
of arguments ending in ``[]`` made its branch's conversation unreadable, and
every later ``pride run`` on that store failed to start. Such a row is now
stored with the documented replacement, as anything else the reader would
refuse is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pride import Branch, Chat, InvalidMessage, Run, Session, iModel
from pride.llm import RetryPolicy
from pride.messages import ActionRequest
from pride.messages.codec import dump_json, parse_json
from pride.store import BranchStore
from pride.testing import Fault, openai_server
from tests.helpers import nested_lists, tool_call_reply


def send(payload: object) -> str:
    """Accept anything."""
    return "sent"


async def test_arguments_that_nest_to_the_row_s_limit_leave_a_store_that_reads_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.db"
    # The row: the message (1), its arguments (2), the payload: 99 levels, the last empty.
    script = [Fault.raw(json.dumps(tool_call_reply(nested_lists(99)))), "sent it", "welcome back"]
    async with openai_server(script) as server:
        model = iModel("openai/m", base_url=server.base_url, api_key="k", retry=RetryPolicy.never())
        async with Session(store=path) as session:
            await session.spawn(Branch(name="agent", chat_model=model, tools=[send]))
            await session.ask("agent", Run("send it"))
        async with BranchStore(path) as store:
            stored = await store.load_messages("agent")  # before: StoreError, does not read back
        [request] = [message for message in stored if isinstance(message, ActionRequest)]
        assert "nested deeper than 100 levels" in json.dumps(request.arguments)
        async with Session(store=path) as session:  # the next process restores the branch
            branch = await session.spawn(Branch(name="agent", chat_model=model, tools=[send]))
            assert len(branch.messages) == len(stored)
            assert await session.ask("agent", Chat("back?")) == "welcome back"


@pytest.mark.parametrize("depth", [1, 2, 99, 100])
def test_what_dump_json_writes_parse_json_reads(depth: int) -> None:
    assert parse_json(dump_json(nested_lists(depth))) == nested_lists(depth)


def test_an_empty_container_counts_as_a_level_as_the_reader_counts_it() -> None:
    """101 levels, the last empty: refused (before: written, then unreadable)."""
    with pytest.raises(InvalidMessage, match="nested deeper than 100 levels"):
        dump_json(nested_lists(101))
