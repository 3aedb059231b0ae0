"""The public surface: what ``pride`` exports, in what order, and under which module name.

``pride`` keeps every name DESIGN.md pins; its ``__all__`` starts with a core a
newcomer can hold in their head and groups the rest by topic (issue 32); and
every class and function it (or a public subpackage) exports names that
public home as its module, for reprs, tracebacks and pickles alike.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import pickle
import re
import sys
import traceback
import types
import typing
from pathlib import Path

import attrs
import pytest

import pride
import pride.messages

ROOT = Path(__file__).resolve().parent.parent

# Every pride name DESIGN.md names (``pride.X`` and the words of its pinned
# sections): tests outside this repository import them from ``pride``.
PINNED = (
    # the send API and the facade
    "Branch", "Session", "send", "ask", "stream", "send_nowait", "Reply", "BranchRef",
    # work commands and system messages
    "Chat", "ChatAndRecord", "Communicate", "Operate", "Parse", "Interpret", "ReAct",
    "ReActStream", "Run", "Act", "Call", "Resume", "Approve", "Deny",
    "Attach", "Detach", "Stop",
    # turns (ADR-0018's names, as DESIGN.md keeps them)
    "TurnExecutionContext", "TurnScope",
    # signals
    "Signal", "RunStart", "RunEnd", "RunFailed", "MessageAdded", "StructuredOutput",
    "BranchStarted", "BranchStopped", "BranchRestarted", "SessionFailed",
    "ApprovalRequested", "ToolProgress", "NodeStarted", "NodeCompleted", "NodeFailed",
    "NodeSkipped", "NodeCancelled", "BranchActivated", "BranchPassivated",
    # errors
    "PrideError", "BranchClosed", "BranchNotRunning", "MailboxFull", "ReentrancyError",
    "TurnFinalizingError", "TurnCancelled", "Escalate", "SupervisorFailed", "UnknownBranch",
    "BudgetExceeded", "ApprovalRequired", "HostLost", "InvalidFlow", "InvalidMessage",
    # budgets, tools, models, flows, context, memory, supervision
    "Budget", "Usage", "Tool", "tool", "iModel", "ScriptedModel", "Flow", "FlowResult",
    "ContextProviderRegistry", "MemoryStore", "Observer",
)  # fmt: skip

# The core, first in __all__ and on the reference page (docs/reference/core.md).
CORE = (
    "Branch", "Session", "send", "ask", "stream", "send_nowait", "Reply",
    "Chat", "ChatAndRecord", "Communicate", "Operate", "Parse", "Interpret", "ReAct",
    "ReActStream", "Run", "Act", "Call",
    "Signal", "RunStart", "RunEnd", "RunFailed", "MessageAdded",
    "PrideError", "BranchClosed", "BranchNotRunning", "MailboxFull", "TurnCancelled",
    "BudgetExceeded", "ProviderError", "ToolError", "InvalidMessage", "UnknownBranch",
    "Escalate", "SupervisorFailed",
    "Tool", "tool", "iModel", "ScriptedModel", "Budget", "Usage",
)  # fmt: skip

# Names no user writes, unpinned: they live only in their subpackages.
SUBPACKAGE_ONLY = {
    "PriorityCommand": "pride.messages",  # the base of the supervisor's messages to an actor
    "Command": "pride.messages",
    "PendingCall": "pride.messages",
    "DEFAULT_SYSTEM_MESSAGE": "pride.messages",
    "HookBus": "pride.supervisors",
    "SessionStatistics": "pride.supervisors",
    "SuspendedTurn": "pride.supervisors",
}

# Public subpackages whose faces export classes written in their private modules.
FACES = (
    "pride.llm",
    "pride.tools",
    "pride.memory",
    "pride.errors",
    "pride.testing",
    "pride.client",
    "pride.aio",
    "pride.cluster",
    "pride.mcp",
    "pride.serve",
    "pride.telemetry",
)


def _routines_and_classes(module: types.ModuleType) -> dict[str, object]:
    return {
        name: value
        for name in module.__all__
        if isinstance(value := getattr(module, name), type) or inspect.isfunction(value)
    }


# ------------------------------------------------------------------ names


def test_every_pinned_name_is_importable_from_pride() -> None:
    missing = [name for name in PINNED if not hasattr(pride, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec(f"from pride import {', '.join(PINNED)}", namespace)
    assert all(namespace[name] is getattr(pride, name) for name in PINNED)


def test_all_lists_every_public_name_once() -> None:
    """__all__ names exactly the non-underscore attributes that are not submodules, once each."""
    public = {
        name
        for name, value in vars(pride).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    repeated = [name for name, n in collections.Counter(pride.__all__).items() if n > 1]
    assert repeated == []
    assert set(pride.__all__) == public
    assert all(hasattr(pride, name) for name in pride.__all__)


def test_all_starts_with_the_core() -> None:
    assert tuple(pride.__all__[: len(CORE)]) == CORE
    assert 35 <= len(CORE) <= 45


def test_names_no_user_writes_live_in_their_subpackages_only() -> None:
    for name, home in SUBPACKAGE_ONLY.items():
        assert not hasattr(pride, name), name
        assert name in importlib.import_module(home).__all__, name


def test_the_reference_lists_pride_in_the_order_of_all() -> None:
    """docs/reference/index.md names every pride export, core first, as __all__ orders them."""
    page = (ROOT / "docs" / "reference" / "index.md").read_text(encoding="utf-8")
    listed = page.split("## The core", 1)[1].split("## The pages", 1)[0]
    names = [name for name in re.findall(r"`(\w+)`", listed) if name in pride.__all__]
    assert names == list(pride.__all__)
    core_page = (ROOT / "docs" / "reference" / "core.md").read_text(encoding="utf-8")
    assert re.findall(r"^::: pride\.(\w+)$", core_page, flags=re.M) == list(CORE)


# ------------------------------------------------------------------ module names


def test_every_class_and_function_names_pride_as_its_module() -> None:
    exported = _routines_and_classes(pride)
    assert len(exported) > 100
    assert {
        name: obj.__module__ for name, obj in exported.items() if obj.__module__ != "pride"
    } == {}
    assert pride.Branch.__module__ == "pride"
    assert pride.send.__module__ == "pride"


@pytest.mark.parametrize("face", FACES)
def test_a_public_subpackage_names_itself_for_what_it_writes(face: str) -> None:
    """A class written in ``pride.llm._model`` shows ``pride.llm`` (or ``pride``, when
    ``pride`` exports it too)."""
    module = importlib.import_module(face)
    wrong = {
        name: obj.__module__
        for name, obj in _routines_and_classes(module).items()
        if obj.__module__.startswith(face + ".")
    }
    assert wrong == {}


@pytest.mark.parametrize("face", ("pride", *FACES))
def test_every_public_module_name_resolves_to_the_object(face: str) -> None:
    """What pickle (and Ray) do: import ``__module__``, look ``__qualname__`` up in it."""
    module = importlib.import_module(face)
    for name, obj in _routines_and_classes(module).items():
        home = importlib.import_module(obj.__module__)  # type: ignore[attr-defined]
        assert getattr(home, obj.__qualname__) is obj, name  # type: ignore[attr-defined]


def test_reprs_and_tracebacks_show_the_public_path() -> None:
    assert repr(pride.Branch) == "<class 'pride.Branch'>"
    assert repr(pride.iModel) == "<class 'pride.iModel'>"
    assert repr(pride.Usage(input_tokens=3)).startswith("Usage(input_tokens=3,")
    assert repr(pride.Chat("hi")).startswith("Chat(budget=None, instruction='hi'")
    assert traceback.format_exception_only(pride.BranchClosed("gone"))[-1].startswith(
        "pride.BranchClosed: branch 'gone' is closed"
    )
    assert "<function ask at" in repr(pride.ask)
    assert pride.ask.__qualname__ == "ask" and pride.ask.__module__ == "pride"


def test_exported_values_survive_a_pickle_round_trip() -> None:
    values = [
        pride.Usage(input_tokens=3, output_tokens=4, cost_usd=0.5, model_calls=1),
        pride.Budget(max_model_calls=3),
        pride.ChatAndRecord("hi", budget=pride.Budget(max_tool_calls=1)),
        pride.Approve(),
        pride.Deny("no"),
    ]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value
    for obj in (pride.Branch, pride.Session, pride.ask, pride.BranchClosed):
        assert pickle.loads(pickle.dumps(obj)) is obj


# ------------------------------------------------------------------ annotations


@pytest.mark.parametrize("face", ("pride", *FACES))
def test_type_hints_resolve_though_the_module_name_moved(face: str) -> None:
    """``typing.get_type_hints`` (what attrs and cattrs call) evaluates a class's string
    annotations in ``sys.modules[cls.__module__]``: they still resolve there."""
    module = importlib.import_module(face)
    for name, obj in _routines_and_classes(module).items():
        if isinstance(obj, type):
            typing.get_type_hints(obj, include_extras=True)
            if attrs.has(obj):
                attrs.resolve_types(obj)
                unresolved = [f.name for f in attrs.fields(obj) if isinstance(f.type, str)]
                assert unresolved == [], name


def test_an_annotation_naming_what_pride_does_not_export_resolves() -> None:
    """MemoryItem's annotations use ``Mapping``, which ``pride`` does not have."""
    assert "Mapping" not in vars(sys.modules[pride.MemoryItem.__module__])
    hints = typing.get_type_hints(pride.MemoryItem)
    assert any("Mapping" in str(hint) for hint in hints.values())


def test_the_codec_round_trips_exported_classes_after_the_move() -> None:
    """cattrs builds its hooks after ``import pride`` moved the module names."""
    from pride.messages import codec

    usage = pride.Usage(input_tokens=3, output_tokens=4, cost_usd=0.5, model_calls=1)
    command = pride.ChatAndRecord("hi", budget=pride.Budget(max_tool_calls=1))
    assert codec.from_json(codec.to_json(usage), pride.Usage) == usage
    assert codec.from_json(codec.to_json(command), pride.WorkCommand) == command


def test_messages_reexported() -> None:
    """Message classes import from both pride and pride.messages."""
    assert pride.Chat is pride.messages.Chat
    assert pride.InvalidMessage is pride.messages.InvalidMessage


def test_version() -> None:
    """The package has a version string."""
    assert isinstance(pride.__version__, str)
