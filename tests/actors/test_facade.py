"""Facade verbs and their commands agree: each verb takes exactly its command's fields.

The verbs are methods written out on Branch, so this is what keeps a field
added to a command from being missed by its verb. The static side (what mypy
and editors see) is checked by mypy itself, on tests/typechecked/facade_calls.py.
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
    """Names, kinds and defaults: the command's, plus timeout on the verbs that wait.

    Positional parameters keep the command's order; keyword-only ones may be
    ordered for reading. A command's field with a made-fresh default (a dict) is
    None on the verb, and one the command converts (typed Any there) is typed
    on the verb; every other annotation is the command's.
    """
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
    keyword = inspect.Parameter.KEYWORD_ONLY
    assert [(p.name, p.kind) for p in params if p.kind is not keyword] == [
        (p.name, p.kind) for p in expected if p.kind is not keyword
    ]
    assert sorted(p.name for p in params if p.kind is keyword) == sorted(
        p.name for p in expected if p.kind is keyword
    )
    declared = {p.name: p for p in expected}
    for shown in params:
        field = declared[shown.name]
        if field.annotation != "Any":
            made_fresh = repr(field.default) == "NOTHING" and shown.default is None
            wanted = f"{field.annotation} | None" if made_fresh else field.annotation
            assert shown.annotation == wanted, shown.name
        if field.default is inspect.Parameter.empty:
            assert shown.default is inspect.Parameter.empty, shown.name
        elif repr(field.default) == "NOTHING":  # made fresh by the command: None on the verb
            assert shown.default is None, shown.name
        else:
            assert shown.default == field.default, shown.name


@pytest.mark.parametrize("name", sorted(VERBS))
def test_a_verb_is_a_documented_method_of_branch(name: str) -> None:
    """Each verb is written in Branch's body, documents every parameter, and names
    its command."""
    verb = getattr(Branch, name)
    assert verb.__qualname__ == f"Branch.{name}"
    doc = inspect.getdoc(verb) or ""
    assert f"[`{VERBS[name].__name__}`][pride.{VERBS[name].__name__}]" in doc
    for parameter in _parameters(verb)[1:]:
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD:
            assert f"    {parameter.name}: " in doc, parameter.name
    assert "Raises:" in doc and "Returns:" in doc
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
