"""ADR-0016 D3 capability contract: grant, revoke, balanced markers, observation only."""

from __future__ import annotations

import dataclasses
from typing import Any

import attrs
import pydantic
import pytest

from pride import (
    AssistantResponse,
    Branch,
    CapabilityViolation,
    EmissionRejected,
    MessageAdded,
    RunEnd,
    ScriptedModel,
    StructuredOutput,
    System,
)
from pride.context import CAP_BEGIN, CAP_END, CapabilityGrant
from pride.context.capabilities import MAX_BLOCKS_PER_REPLY, extract_blocks, strip_block
from tests.helpers import Recorder


@attrs.define
class Finding:
    claim: str
    confidence: float = 0.5


@attrs.define
class Grant:
    finding: Finding
    question: str | None = None


@dataclasses.dataclass
class DataGrant:
    finding: Finding
    tally: int = 0


class PydanticFinding(pydantic.BaseModel):
    claim: str
    confidence: float = 0.5


class PydanticGrant(pydantic.BaseModel):
    finding: PydanticFinding
    question: str | None = None


def fenced(body: str, prose: str = "Here is what I found.") -> str:
    return f"{prose}\n```json\n{body}\n```\nThat is all."


def system_text(branch: Branch) -> str:
    assert branch.system is not None
    return branch.system.system_message


async def observed(branch_kwargs: dict[str, Any], reply: str, grant: type = Grant) -> Recorder:
    """Record one reply on a granted branch and return what the observer saw."""
    recorder = Recorder()
    branch = Branch(chat_model=ScriptedModel([reply]), observer=recorder, **branch_kwargs)
    branch.grant_capabilities(grant)
    async with branch:
        await branch.chat_and_record("go")
    return recorder


# ------------------------------------------------------------------- granting


def test_grant_stores_the_runtime_grant_and_prompts_the_schema() -> None:
    """grant_capabilities installs the grant and appends a marked block with the schema."""
    branch = Branch(chat_model="scripted", system="You are a researcher.")
    grant = branch.grant_capabilities(Grant)
    assert branch.capabilities is grant and grant.keys == ("finding", "question")
    text = system_text(branch)
    assert text.startswith("You are a researcher.\n\n" + CAP_BEGIN)
    assert text.endswith(CAP_END)
    assert "finding" in text and "question" in text and "claim" in text
    assert CAP_BEGIN == "<!-- pride:capabilities -->"


def test_granting_without_a_system_message_creates_one() -> None:
    """A branch with no system prompt gets one holding only the block."""
    branch = Branch(chat_model="scripted")
    branch.grant_capabilities(Grant)
    assert system_text(branch).startswith(CAP_BEGIN)


def test_the_new_system_message_replaces_the_old_one() -> None:
    """The prompt change is a new System message, first in the history, keeping its fields."""
    branch = Branch(chat_model="scripted", system="Base.", system_sender="ops")
    old = branch.system
    branch.grant_capabilities(Grant)
    assert branch.system is not old and branch.system is not None
    assert branch.system.id != old.id and branch.system.sender == "ops"  # type: ignore[union-attr]
    assert branch.messages[0] is branch.system
    assert sum(isinstance(m, System) for m in branch.messages) == 1


def test_regranting_replaces_the_block_instead_of_stacking_it() -> None:
    """Re-granting removes the balanced block and appends a fresh one."""
    branch = Branch(chat_model="scripted", system="Base.")
    branch.grant_capabilities(Grant)
    branch.grant_capabilities(DataGrant)
    text = system_text(branch)
    assert text.count(CAP_BEGIN) == 1 and text.count(CAP_END) == 1
    assert "tally" in text and "question" not in text
    assert text.startswith("Base.\n\n")


def test_unbalanced_markers_are_left_untouched() -> None:
    """A prompt with unbalanced markers is never cut: its text survives, the block is appended."""
    base = f"Important user instructions.\n{CAP_BEGIN}\nhalf a block, no end"
    assert strip_block(base) == base
    branch = Branch(chat_model="scripted", system=base)
    branch.grant_capabilities(Grant)
    text = system_text(branch)
    assert text.startswith(base)
    branch.revoke_capabilities()
    assert system_text(branch).startswith(base)


def test_strip_removes_only_a_balanced_block() -> None:
    """A balanced block is removed cleanly, keeping the text around it."""
    balanced = f"Keep me.\n{CAP_BEGIN}\nbody\n{CAP_END}\nKeep me too."
    assert strip_block(balanced) == "Keep me.\n\nKeep me too."
    reversed_markers = f"a {CAP_END} b {CAP_BEGIN} c"
    assert strip_block(reversed_markers) == reversed_markers


def test_prompt_false_installs_only_the_runtime_grant() -> None:
    """prompt=False sets the grant and leaves the system prompt as it was."""
    branch = Branch(chat_model="scripted", system="Base.")
    before = branch.system
    branch.grant_capabilities(Grant, prompt=False)
    assert branch.capabilities is not None and branch.system is before
    bare = Branch(chat_model="scripted")
    bare.grant_capabilities(Grant, prompt=False)
    assert bare.system is None


def test_revoke_clears_the_grant_and_removes_a_balanced_block() -> None:
    """revoke_capabilities clears the grant and restores the base prompt."""
    branch = Branch(chat_model="scripted", system="Base prompt.")
    branch.grant_capabilities(Grant)
    branch.revoke_capabilities()
    assert branch.capabilities is None and system_text(branch) == "Base prompt."
    bare = Branch(chat_model="scripted")
    bare.grant_capabilities(Grant)
    bare.revoke_capabilities()
    assert bare.system is None


@pytest.mark.parametrize("operable", [Grant, DataGrant, PydanticGrant])
def test_an_operable_is_an_attrs_class_a_dataclass_or_a_pydantic_model(operable: type) -> None:
    """The granted keys are the operable's field names."""
    grant = CapabilityGrant.from_operable(operable)
    assert grant.keys[0] == "finding" and grant.operable is operable


@pytest.mark.parametrize("operable", [dict, Finding(claim="x"), "Grant"])
def test_other_operables_are_type_errors(operable: Any) -> None:
    """Anything else, instances included, is rejected with TypeError."""
    with pytest.raises(TypeError, match="operable"):
        Branch(chat_model="scripted").grant_capabilities(operable)


def test_the_grant_is_neither_serialised_nor_cloned() -> None:
    """Capabilities stay with the live branch: absent from to_dict and from clones."""
    branch = Branch(chat_model="scripted", system="Base.")
    branch.grant_capabilities(Grant, prompt=False)
    assert "capabilities" not in branch.to_dict()
    assert branch.clone().capabilities is None
    assert Branch.from_dict(branch.to_dict()).capabilities is None


# ----------------------------------------------------------------- observation


async def test_a_valid_block_is_observed_as_structured_output_after_message_added() -> None:
    """A wholly granted block gives StructuredOutput after its MessageAdded, before RunEnd."""
    recorder = await observed({}, fenced('{"finding": {"claim": "wired"}}'))
    kinds = recorder.kinds()
    assert kinds[-3:] == ["MessageAdded", "StructuredOutput", "RunEnd"]
    (output,) = recorder.of(StructuredOutput)
    assert output.data == {"finding": {"claim": "wired", "confidence": 0.5}}
    assert output.turn_id == recorder.of(RunEnd)[0].turn_id is not None
    assert isinstance(recorder.of(MessageAdded)[-1].message, AssistantResponse)


async def test_a_reply_that_is_one_json_object_is_observed_too() -> None:
    """A reply that is a bare JSON object counts as a block."""
    recorder = await observed({}, '{"question": "why?"}')
    assert [s.data for s in recorder.of(StructuredOutput)] == [{"question": "why?"}]


async def test_blocks_with_no_granted_key_are_ignored() -> None:
    """Fenced JSON with no granted key (or no JSON object) produces no capability signal."""
    reply = fenced('{"weather": "sunny"}') + "\n```json\n[1, 2]\n```\n```json\nnot json\n```"
    recorder = await observed({}, reply)
    assert not recorder.of(StructuredOutput) and not recorder.of(CapabilityViolation)
    assert not recorder.of(EmissionRejected)


async def test_a_block_mixing_granted_and_other_keys_is_a_capability_violation() -> None:
    """Granted plus ungranted keys give CapabilityViolation naming the offending keys."""
    recorder = await observed({}, fenced('{"finding": {"claim": "x"}, "delete_all": true}'))
    (violation,) = recorder.of(CapabilityViolation)
    assert violation.offending == ("delete_all",)
    assert violation.allowed == ("finding", "question")
    assert violation.block == {"finding": {"claim": "x"}, "delete_all": True}
    assert not recorder.of(StructuredOutput)


async def test_a_block_nested_too_deeply_to_read_is_not_json_and_the_turn_ends_ok() -> None:
    """Model output is hostile: a block nested past any JSON reader's depth (the
    standard library raises RecursionError) is prose like any block that is not
    JSON, so recording the reply neither fails the turn nor signals anything."""
    deep = '{"finding": ' + "[" * 100_000 + "]" * 100_000 + "}"
    recorder = await observed({}, fenced(deep) + "\n" + fenced('{"question": "why?"}'))
    assert [s.data for s in recorder.of(StructuredOutput)] == [{"question": "why?"}]
    assert recorder.of(RunEnd) and not recorder.of(EmissionRejected)


@pytest.mark.parametrize("opener", ["```", "```json"])
async def test_a_fence_then_a_megabyte_of_blanks_is_read_in_linear_time(opener: str) -> None:
    """Model output is hostile: a fence never closed, then a megabyte of spaces and
    tabs. The blanks allowed after the fence backtracked through the rest of the
    reply once per blank (80 KB took 30 s of the event loop, every branch of the
    process waiting). Read in linear time, it is prose: the turn ends ok, nothing
    signalled (a timeout if it is not)."""
    recorder = await observed({}, opener + " \t" * 500_000)
    assert recorder.of(RunEnd) and not recorder.of(StructuredOutput)


@pytest.mark.parametrize("operable", [Grant, PydanticGrant])
async def test_an_invalid_granted_block_is_rejected(operable: type) -> None:
    """A wholly granted block that fails validation gives EmissionRejected with the error."""
    recorder = await observed({}, fenced('{"finding": {"claim": 5}}'), grant=operable)
    (rejected,) = recorder.of(EmissionRejected)
    assert rejected.error.startswith("finding:")
    assert rejected.block == {"finding": {"claim": 5}}
    assert not recorder.of(StructuredOutput)


async def test_each_block_of_a_reply_is_observed_in_order() -> None:
    """Several blocks in one reply give one signal each, in reply order."""
    reply = fenced('{"question": "a"}') + fenced('{"finding": {"claim": 1}}', prose="")
    recorder = await observed({}, reply, grant=DataGrant)
    kinds = [k for k in recorder.kinds() if k in ("StructuredOutput", "EmissionRejected")]
    assert kinds == ["EmissionRejected"]  # "question" is not granted by DataGrant: ignored
    recorder = await observed({}, reply)
    kinds = [k for k in recorder.kinds() if k in ("StructuredOutput", "EmissionRejected")]
    assert kinds == ["StructuredOutput", "EmissionRejected"]


async def test_the_blocks_observed_in_one_reply_are_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Model output is hostile: every fenced block of a reply became a signal, and a
    reply may hold hundreds of thousands (20 bytes each: a 32 MiB reply, over a
    million signals for the observer). The first MAX_BLOCKS_PER_REPLY are observed,
    and a warning says the rest were not."""
    block = '```json\n{"question": "q"}\n```\n'
    recorder = await observed({}, block * (MAX_BLOCKS_PER_REPLY + 500))
    assert len(recorder.of(StructuredOutput)) == MAX_BLOCKS_PER_REPLY
    assert "MAX_BLOCKS_PER_REPLY" in caplog.text


async def test_observation_never_executes_anything() -> None:
    """A block naming a tool is observed only: the tool is not called and nothing is recorded."""
    called: list[str] = []

    def finding(claim: str) -> None:
        """A tool that must not run."""
        called.append(claim)

    recorder = await observed({"tools": [finding]}, fenced('{"finding": {"claim": "x"}}'))
    assert called == [] and len(recorder.of(StructuredOutput)) == 1


async def test_without_a_grant_replies_are_not_observed() -> None:
    """No grant, no capability signals."""
    recorder = Recorder()
    model = ScriptedModel([fenced('{"finding": {"claim": "x"}}')])
    async with Branch(chat_model=model, observer=recorder) as branch:
        await branch.chat_and_record("go")
    assert recorder.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]


def test_extract_blocks_reads_fenced_objects_only() -> None:
    """Fenced json (or bare) blocks that parse to objects are returned, in order."""
    text = '```json\n{"a": 1}\n```\n```\n{"b": 2}\n```\n```json\n3\n```'
    assert extract_blocks(text) == [{"a": 1}, {"b": 2}]
    assert extract_blocks("no json here") == []
