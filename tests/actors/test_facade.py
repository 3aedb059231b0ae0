"""Facade verbs and their commands agree: one parameter list, declared on the command.

The static side (what mypy and editors see) is checked by mypy itself, on
tests/typechecked/facade_calls.py.
"""

from __future__ import annotations

import inspect

import pytest

import pride
from pride import Branch
from pride.messages import commands
from tests.helpers import echo_model

VERBS = {
    "chat": commands.Chat,
    "chat_and_record": commands.ChatAndRecord,
    "communicate": commands.Communicate,
    "operate": commands.Operate,
    "parse": commands.Parse,
    "interpret": commands.Interpret,
    "act": commands.Act,
    "ReAct": commands.ReAct,
    "ReActStream": commands.ReActStream,
    "run": commands.Run,
    "call": commands.Call,
    "resume": commands.Resume,
}
STREAMING = {"ReActStream", "run"}


def _parameters(function: object) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]


def test_every_work_command_has_a_verb() -> None:
    """Each public work command (but the internal ones) is a Branch verb."""
    work = {
        cls
        for name in commands.__all__
        if isinstance(cls := getattr(commands, name), type)
        and issubclass(cls, commands.WorkCommand)
        and cls is not commands.WorkCommand
    }
    assert work == set(VERBS.values())


@pytest.mark.parametrize("name", sorted(VERBS))
def test_a_verb_takes_exactly_its_commands_parameters(name: str) -> None:
    """Names, kinds, order, annotations and defaults: the command's, then timeout."""
    command = VERBS[name]
    verb = getattr(Branch, name)
    own, *params = _parameters(verb)
    assert own.name == "self"
    expected = _parameters(command)
    if name == "act":  # one call or a list, converted into the command's tuple
        assert params[0].name == "action_request"
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY
        params, expected = params[1:], expected[1:]
    if name not in STREAMING:
        timeout = next(p for p in params if p.name == "timeout")
        assert timeout.kind is inspect.Parameter.KEYWORD_ONLY and timeout.default is None
        params.remove(timeout)
    assert [p.name for p in params] == [p.name for p in expected]
    assert [p.kind for p in params] == [p.kind for p in expected]
    assert [p.annotation for p in params] == [p.annotation for p in expected]
    for shown, declared in zip(params, expected, strict=True):
        if declared.default is not inspect.Parameter.empty and repr(shown.default) != "dict()":
            assert shown.default == declared.default, shown.name


@pytest.mark.parametrize("name", sorted(VERBS))
def test_a_verb_is_documented_by_its_command(name: str) -> None:
    """help(branch.<verb>) shows the command's docstring and what the verb does."""
    verb = getattr(Branch, name)
    assert verb.__name__ == name
    assert (inspect.getdoc(VERBS[name]) or "") in (verb.__doc__ or "")
    assert f"branch.{name}(" in (verb.__doc__ or "")
    assert inspect.iscoroutinefunction(verb) == (name not in STREAMING)


async def test_verbs_pass_their_arguments_to_the_command() -> None:
    """Positional, keyword and timeout arguments reach the command; a typo is refused."""
    async with Branch(chat_model=echo_model()) as branch:
        assert await branch.chat("hi", guidance="be brief", timeout=5) == (
            "re: hi\n\nGuidance: be brief"
        )
        assert await branch.chat(instruction="named") == "re: named"
        with pytest.raises(TypeError, match="guidanse"):
            await branch.chat("hi", guidanse="brief")
        responses = await branch.act(
            {"function": "missing", "arguments": {}}, suppress_errors=True, timeout=5
        )
        assert responses[0].error is not None
        async with branch.run("streamed", max_rounds=0) as items:
            kinds = [type(item).__name__ async for item in items]
        assert kinds[0] == "Instruction"
        assert await pride.ask(branch, pride.Call("chat", instruction="via call")) == (
            "re: via call"
        )
