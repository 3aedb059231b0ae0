"""ADR-0016 D1: Branch is the authoritative conversation aggregate (construction semantics)."""

from __future__ import annotations

import pytest

from pride import Branch, LogConfig, MessageAdded, ScriptedModel, System, iModel
from pride.actors import DataLogger, LogEntry
from pride.branch.branch import PRIDE_SYSTEM_MESSAGE
from pride.memory import InMemoryStore
from pride.operations.registry import OperationManager
from pride.tools import ActionManager, Tool
from tests.helpers import Recorder, echo_model


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def entry(name: str = "m") -> LogEntry:
    return LogEntry(kind="model", name=name, started_at=0.0, duration_ms=1.0, status="ok")


# --------------------------------------------------------- the object graph


def test_construction_creates_the_five_managers() -> None:
    """A branch owns messages, actions, models, logs and operations, reachable by property."""
    branch = Branch(chat_model="scripted")
    assert len(branch.messages) == 0 and branch.msgs is branch.messages
    assert isinstance(branch.acts, ActionManager)
    assert isinstance(branch.chat_model, iModel) and isinstance(branch.parse_model, iModel)
    assert isinstance(branch.logs, DataLogger)
    assert isinstance(branch.operations, OperationManager)


# ------------------------------------------------ "Exact construction semantics"


def test_no_chat_model_builds_one_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """If no chat model is supplied, an iModel is built from the PRIDE_CHAT_MODEL setting."""
    monkeypatch.setenv("PRIDE_CHAT_MODEL", "scripted/from-settings")
    branch = Branch()
    assert isinstance(branch.chat_model, ScriptedModel)
    assert branch.chat_model.model == "from-settings"


def test_no_chat_model_and_no_setting_uses_the_documented_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the setting the default chat model is openai/gpt-4.1-mini."""
    monkeypatch.delenv("PRIDE_CHAT_MODEL", raising=False)
    model = Branch().chat_model
    assert (model.provider, model.model) == ("openai", "gpt-4.1-mini")


def test_no_parse_model_aliases_the_chat_model_object() -> None:
    """If no parse model is supplied, the parse model is the selected chat-model object."""
    chat = echo_model()
    branch = Branch(chat_model=chat)
    assert branch.parse_model is chat is branch.chat_model


def test_a_given_parse_model_is_kept_distinct() -> None:
    """A supplied parse model is its own object, not the chat model."""
    chat, parse = echo_model(), echo_model()
    branch = Branch(chat_model=chat, parse_model=parse)
    assert branch.parse_model is parse and branch.parse_model is not branch.chat_model


def test_dictionary_model_inputs_use_imodel_from_dict() -> None:
    """Dictionary inputs build the model with iModel.from_dict."""
    spec = {"provider": "openai", "model": "gpt-4o", "timeout": 5.0, "request_options": {"n": 1}}
    branch = Branch(chat_model=spec, parse_model={"provider": "scripted", "model": "p"})
    assert (branch.chat_model.provider, branch.chat_model.model) == ("openai", "gpt-4o")
    assert branch.chat_model.timeout == 5.0 and branch.chat_model.request_options == {"n": 1}
    assert isinstance(branch.parse_model, ScriptedModel) and branch.parse_model.model == "p"
    assert spec == {
        "provider": "openai",
        "model": "gpt-4o",
        "timeout": 5.0,
        "request_options": {"n": 1},
    }


def test_string_model_inputs_name_the_model() -> None:
    """String inputs are the model: "provider/name" splits; a bare name is OpenAI's."""
    branch = Branch(chat_model="anthropic/claude-sonnet-4", parse_model="gpt-4o-mini")
    assert (branch.chat_model.provider, branch.chat_model.model) == (
        "anthropic",
        "claude-sonnet-4",
    )
    assert (branch.parse_model.provider, branch.parse_model.model) == ("openai", "gpt-4o-mini")


def test_a_model_of_another_type_is_a_type_error() -> None:
    """A model that is neither an iModel, a dict nor a string raises TypeError."""
    with pytest.raises(TypeError):
        Branch(chat_model=42)  # type: ignore[arg-type]


def test_tools_are_registered_into_the_new_action_manager() -> None:
    """Callables and Tools given to the constructor are registered on branch.acts."""
    branch = Branch(chat_model="scripted", tools=[add, Tool(len, name="length")])
    assert branch.acts.names == ("add", "length")
    assert set(branch.tools) == {"add", "length"}
    assert Branch(chat_model="scripted", tools=add).acts.names == ("add",)


def test_duplicate_tools_fail_as_the_action_manager_decides() -> None:
    """Duplicate and update behaviour is the action manager's: a repeated name raises."""
    with pytest.raises(ValueError, match="already registered"):
        Branch(chat_model="scripted", tools=[add, Tool(add)])
    branch = Branch(chat_model="scripted", tools=[add])
    branch.register_tools(Tool(add, description="new"), update=True)
    assert branch.tools["add"].description == "new"


def test_a_truthy_log_config_dict_is_validated_as_logconfig() -> None:
    """A truthy dictionary log configuration becomes a LogConfig with those fields."""
    branch = Branch(chat_model="scripted", log_config={"capacity": 3, "include_content": True})
    assert branch.logs.config == LogConfig(capacity=3, include_content=True)


@pytest.mark.parametrize(
    ("config", "error"),
    [({"capacity": 0}, ValueError), ({"colour": "red"}, ValueError), (["capacity"], TypeError)],
)
def test_an_invalid_log_config_is_rejected(config: object, error: type[Exception]) -> None:
    """Validation rejects bad values, unknown fields and non-mapping configs."""
    with pytest.raises(error):
        Branch(chat_model="scripted", log_config=config)  # type: ignore[arg-type]


@pytest.mark.parametrize("config", [None, {}])
def test_none_or_an_empty_log_config_uses_the_defaults(config: dict[str, int] | None) -> None:
    """None and {} (falsy) give the default log configuration."""
    assert Branch(chat_model="scripted", log_config=config).logs.config == LogConfig()


def test_supplied_logs_initialise_the_logger() -> None:
    """Supplied logs fill the branch's one logger, not a second pile."""
    supplied = [entry("a"), entry("b").to_dict()]
    branch = Branch(chat_model="scripted", logs=supplied, log_config={"capacity": 5})
    assert [e.name for e in branch.logs] == ["a", "b"]
    assert branch.logs.config.capacity == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"system": ""},
        {"system": None},
        {"system_datetime": False},
        {"system_datetime": ""},
        {"use_lion_system_message": False},
        {"system": "", "system_datetime": False, "use_lion_system_message": False},
    ],
)
def test_no_system_message_unless_one_input_is_truthy(kwargs: dict[str, object]) -> None:
    """An explicitly empty string or False values alone create no system message."""
    branch = Branch(chat_model="scripted", **kwargs)  # type: ignore[arg-type]
    assert branch.system is None and len(branch.messages) == 0


def test_a_truthy_system_creates_the_system_message() -> None:
    """A system string becomes the conversation's first message."""
    branch = Branch(chat_model="scripted", system="Be brief.", system_sender="ops")
    assert branch.system is not None and branch.system.system_message == "Be brief."
    assert branch.system.sender == "ops" and branch.messages[0] is branch.system


def test_a_system_message_object_is_used_as_is() -> None:
    """A System instance is kept (its id and text)."""
    system = System(system_message="Exact.")
    branch = Branch(chat_model="scripted", system=system)
    assert branch.system == system


def test_system_datetime_alone_creates_a_stamped_default_system() -> None:
    """A truthy system_datetime alone creates the default system message, time-stamped."""
    branch = Branch(chat_model="scripted", system_datetime="2026-01-01 00:00 UTC")
    assert branch.system is not None
    assert branch.system.text.startswith("System Time: 2026-01-01 00:00 UTC")
    assert Branch(chat_model="scripted", system_datetime=True).system is not None


def test_the_pride_system_message_is_prepended_when_requested() -> None:
    """use_lion_system_message prepends pride's preamble (alone, or before the given text)."""
    alone = Branch(chat_model="scripted", use_lion_system_message=True)
    assert alone.system is not None and alone.system.system_message == PRIDE_SYSTEM_MESSAGE
    both = Branch(chat_model="scripted", system="Be brief.", use_lion_system_message=True)
    assert both.system is not None
    assert both.system.system_message == f"{PRIDE_SYSTEM_MESSAGE}\n\nBe brief."


def test_a_system_of_another_type_is_a_type_error() -> None:
    """A system that is neither a string nor a System raises TypeError."""
    with pytest.raises(TypeError, match="system must be"):
        Branch(chat_model="scripted", system={"text": "hi"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"system_template": "x"}, {"system_template_context": {"a": 1}}]
)
def test_system_template_warns_deprecation_and_has_no_effect(kwargs: dict[str, object]) -> None:
    """A non-None system_template(_context) warns DeprecationWarning and changes nothing."""
    with pytest.warns(DeprecationWarning, match="no effect"):
        branch = Branch(chat_model="scripted", system="Base.", **kwargs)  # type: ignore[arg-type]
    assert branch.system is not None and branch.system.system_message == "Base."


def test_recorded_messages_reach_an_attached_observer() -> None:
    """The message-added path projects each recorded message onto the observer."""
    recorder = Recorder()
    branch = Branch(chat_model="scripted", observer=recorder)
    message = branch.add_message(System(system_message="s"))
    added = recorder.of(MessageAdded)
    assert [signal.message for signal in added] == [message]
    assert added[0].branch_id == branch.id and added[0].turn_id is None


def test_an_explicit_memory_must_be_a_memory_store() -> None:
    """memory= accepts a MemoryStore; anything else is a TypeError."""
    store = InMemoryStore()
    assert Branch(chat_model="scripted", memory=store).memory is store
    with pytest.raises(TypeError, match="MemoryStore"):
        Branch(chat_model="scripted", memory={"not": "a store"})  # type: ignore[arg-type]
