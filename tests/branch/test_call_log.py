"""A branch's call log: what it records, its bound, dump_logs, and what it never holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pride import AuthenticationFailed, Branch, ScriptedModel, iModel
from pride.actors import LogEntry
from pride.llm import RetryPolicy, ToolCall
from pride.testing import Fault, openai_server
from tests.helpers import echo_model

SECRET = "sk-test-LOGSECRET-0123456789abcdef"


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def entry(name: str) -> LogEntry:
    return LogEntry(kind="model", name=name, started_at=0.0, duration_ms=1.0, status="ok")


async def test_model_and_tool_calls_are_recorded() -> None:
    """Each model call and tool call leaves one entry: kind, name, status, usage, timing."""
    model = ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "5"])
    async with Branch(chat_model=model, tools=[add]) as branch:
        await branch.operate("sum", actions=True)
        await branch.act({"function": "missing", "arguments": {}})
    kinds = [(e.kind, e.name, e.status) for e in branch.logs]
    assert kinds == [
        ("model", "scripted", "ok"),
        ("tool", "add", "ok"),
        ("model", "scripted", "ok"),
        ("tool", "missing", "error"),
    ]
    first = next(iter(branch.logs))
    assert first.input_tokens > 0 and first.output_tokens >= 0 and first.duration_ms >= 0
    assert first.turn_id is not None and first.detail == {}


def test_the_log_is_bounded_by_its_capacity() -> None:
    """Past capacity the oldest entries are dropped, and counted."""
    branch = Branch(chat_model="scripted", log_config={"capacity": 2})
    for name in "abc":
        branch.logs.append(entry(name))
    assert [e.name for e in branch.logs] == ["b", "c"] and branch.logs.dropped == 1


@pytest.mark.parametrize("capacity", [1, 7, 8, 9, 20])
def test_the_bound_holds_on_either_side_of_the_short_log(capacity: int) -> None:
    """A short log is kept compactly and a longer one in a bounded queue: across
    that change the newest ``capacity`` entries are kept, in order, and the rest
    counted as dropped."""
    branch = Branch(chat_model="scripted", log_config={"capacity": capacity})
    names = [f"e{index}" for index in range(25)]
    for count, name in enumerate(names, start=1):
        branch.logs.append(entry(name))
        kept = names[max(0, count - capacity) : count]
        assert [e.name for e in branch.logs] == kept
        assert len(branch.logs) == len(kept) and branch.logs.dropped == count - len(kept)
    branch.logs.clear()
    assert not branch.logs and len(branch.logs) == 0
    branch.logs.append(entry("again"))
    assert [e.name for e in branch.logs] == ["again"]


def test_dump_logs_writes_json_lines_and_clears(tmp_path: Path) -> None:
    """dump_logs appends one JSON object per entry and clears the log unless told not to."""
    branch = Branch(chat_model="scripted", logs=[entry("a"), entry("b")])
    target = branch.dump_logs(tmp_path / "log.jsonl", clear=False)
    assert len(branch.logs) == 2
    branch.dump_logs(target)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["name"] for line in lines] == ["a", "b", "a", "b"]
    assert len(branch.logs) == 0


def test_dump_logs_defaults_to_the_configured_directory(tmp_path: Path) -> None:
    """Without a path the file goes to log_config.persist_dir; with neither it is a ValueError."""
    branch = Branch(
        chat_model="scripted", logs=[entry("a")], log_config={"persist_dir": str(tmp_path)}
    )
    path = branch.dump_logs()
    assert path.parent == tmp_path and path.suffix == ".jsonl"
    with pytest.raises(ValueError, match="path"):
        Branch(chat_model="scripted", logs=[entry("a")]).dump_logs()


async def test_content_is_logged_only_when_configured() -> None:
    """Prompts and replies enter the log only with include_content=True."""
    async with Branch(chat_model=echo_model()) as plain:
        await plain.chat("private words")
    assert "private words" not in json.dumps(plain.logs.to_list())
    config = {"include_content": True}
    async with Branch(chat_model=echo_model(), log_config=config) as verbose:
        await verbose.chat("private words")
    (logged,) = verbose.logs
    assert logged.detail["reply"] == "re: private words"


async def test_no_api_key_reaches_the_log_dump_or_projection(tmp_path: Path) -> None:
    """Over real HTTP, a successful and a rejected call leave no trace of the key anywhere."""
    async with openai_server(["fine", Fault.status(401)]) as server:
        model = iModel(
            "openai/gpt-4o",
            base_url=server.base_url,
            api_key=SECRET,
            retry=RetryPolicy(max_retries=0),
        )
        config = {"include_content": True}
        async with model, Branch(chat_model=model, log_config=config) as branch:
            assert await branch.chat("hello") == "fine"
            with pytest.raises(AuthenticationFailed):
                await branch.chat("again")
    statuses = [(e.status, e.error_type) for e in branch.logs]
    assert statuses == [("ok", None), ("error", "AuthenticationFailed")]
    projection = json.dumps(branch.to_dict(mode="json", include_log_config=True))
    dumped = branch.dump_logs(tmp_path / "calls.jsonl").read_text()
    assert SECRET not in projection and SECRET not in dumped
    assert "hello" in dumped  # content was configured on; only the key is never there
