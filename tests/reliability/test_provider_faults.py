"""Provider faults through the loopback server: every turn ends, typed, and the branch serves on.

Each case runs one turn against a misbehaving loopback server (OpenAI and
Anthropic wire formats), then a second, healthy turn. The faulty turn ends
with ``RunEnd`` (the model's retries absorbed the fault) or ``RunFailed``
naming the right :class:`~pride.ProviderError`; a failed turn records no
assistant message, not even part of one (streamed recording turns cut
mid-reply included); the invariant checker holds throughout.

These run on the real clock (MockClock's autojump would jump time while
sockets wait) with millisecond retry delays and a 0.1 s read timeout.
"""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest

import pride
from pride import (
    AssistantResponse,
    Branch,
    ChatAndRecord,
    Instruction,
    Run,
    RunEnd,
    RunFailed,
)
from pride.llm import RetryPolicy, iModel
from pride.testing import Fault, openai_server
from tests.reliability.invariants import InvariantChecker

KEY = "sk-reliability-provider-0123456789"
RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01, jitter=0)
LONG = "streamed words " * 30


@attrs.frozen
class Case:
    """A faulty turn: the script before the healthy reply, how it is asked, what it ends as."""

    script: tuple[Any, ...]
    verb: str  # "ask": ChatAndRecord by ask; "stream": ChatAndRecord streamed; "run": Run streamed
    outcome: str  # "RunEnd" or the RunFailed error type
    text: str = "ok"


CASES = {
    "429 with Retry-After, then fine": Case(
        (Fault.status(429, retry_after=0.01), "ok"), "ask", "RunEnd"
    ),
    "500/503 burst, then fine": Case((Fault.status(500), Fault.status(503), "ok"), "ask", "RunEnd"),
    "500 past the retries": Case((Fault.status(500),) * 3, "ask", "ServerError"),
    "429 past the retries": Case((Fault.status(429, retry_after=0),) * 3, "ask", "RateLimited"),
    "401": Case((Fault.status(401),), "ask", "AuthenticationFailed"),
    "reset mid-body, then fine": Case((Fault.cut_stream(), "ok"), "ask", "RunEnd"),
    "slow first byte past the timeout": Case(
        (Fault.slow_first_byte(0.5),) * 3, "ask", "ProviderTimeout"
    ),
    "malformed JSON": Case((Fault.malformed_json(),), "ask", "MalformedResponse"),
    "malformed SSE": Case((Fault.malformed_sse(),), "stream", "MalformedResponse"),
    "reset before any text, then fine": Case(
        (Fault.cut_stream(after_chunks=0, reply=LONG), "ok"), "stream", "RunEnd"
    ),
    "reset mid-stream of a recording turn": Case(
        (Fault.cut_stream(after_chunks=6, reply=LONG),), "stream", "ProviderConnectionError"
    ),
    "reset mid-stream of a run": Case(
        (Fault.cut_stream(after_chunks=6, reply=LONG),), "run", "ProviderConnectionError"
    ),
    "slow first byte of a stream": Case(
        (Fault.slow_first_byte(0.5, reply=LONG),) * 3, "stream", "ProviderTimeout"
    ),
}


def model_for(provider: str, server: Any) -> iModel:
    name = "openai/gpt-4.1-mini" if provider == "openai" else "anthropic/claude-sonnet-4"
    return iModel(name, base_url=server.base_url, api_key=KEY, retry=RETRY, timeout=0.1)


async def turn(branch: Branch, verb: str, text: str) -> Any:
    if verb == "ask":
        return await pride.ask(branch, ChatAndRecord(text))
    command = ChatAndRecord(text) if verb == "stream" else Run(text)
    async with pride.stream(branch, command) as items:
        return [item async for item in items]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("name", list(CASES))
async def test_a_provider_fault_ends_the_turn_typed_and_the_branch_serves_on(
    provider: str, name: str
) -> None:
    """The faulty turn ends with RunEnd or the right RunFailed, records no partial
    reply, and the next turn is answered."""
    case = CASES[name]
    checker = InvariantChecker()
    async with openai_server([*case.script, "next reply"]) as server:
        with checker.envelopes():
            async with Branch(chat_model=model_for(provider, server), observer=checker) as branch:
                checker.baseline(branch)
                error: BaseException | None = None
                try:
                    await turn(branch, case.verb, "faulty")
                except pride.ProviderError as exc:
                    error = exc
                assert await branch.chat_and_record("healthy") == "next reply"
    checker.check(branch, quiescent=True)
    first = next(s for s in checker.signals if isinstance(s, RunEnd | RunFailed))
    if case.outcome == "RunEnd":
        assert isinstance(first, RunEnd) and error is None
    else:
        assert isinstance(first, RunFailed) and first.error_type == case.outcome
        assert type(error).__name__ == case.outcome
    texts = [(type(m).__name__, m.text) for m in branch.messages]
    replies = [text for kind, text in texts if kind == "AssistantResponse"]
    if case.outcome == "RunEnd":
        assert replies == [case.text, "next reply"]
    else:
        assert replies == ["next reply"]  # nothing of the failed reply, whole or partial
        # Only Run records its instruction before calling the model.
        faulty = [text for kind, text in texts if kind == "Instruction" and text == "faulty"]
        assert len(faulty) == (1 if case.verb == "run" else 0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_burst_of_faults_across_many_turns(provider: str) -> None:
    """Twelve turns over a server failing in every way: each ends once, typed; the
    history holds exactly the exchanges of the turns that ended with RunEnd."""
    script = [
        Fault.status(503),
        "one",
        Fault.status(500),
        Fault.status(500),
        Fault.status(500),
        Fault.cut_stream(after_chunks=6, reply=LONG),
        Fault.malformed_json(),
        "two",
        Fault.status(429, retry_after=0.01),
        "three",
        Fault.malformed_sse(),
        Fault.cut_stream(after_chunks=0, reply=LONG),
        "four",
    ]
    checker = InvariantChecker()
    verbs = ["ask", "ask", "stream", "ask", "ask", "ask", "stream", "stream"]
    async with openai_server(script) as server:
        with checker.envelopes():
            async with Branch(chat_model=model_for(provider, server), observer=checker) as branch:
                checker.baseline(branch)
                for index, verb in enumerate(verbs):
                    with contextlib.suppress(pride.ProviderError):
                        await turn(branch, verb, f"turn {index}")
    checker.check(branch, quiescent=True)
    ended = [s.turn_id for s in checker.signals if isinstance(s, RunEnd)]
    failed = [s.error_type for s in checker.signals if isinstance(s, RunFailed)]
    assert failed == [
        "ServerError",
        "ProviderConnectionError",
        "MalformedResponse",
        "MalformedResponse",
    ]
    assert len(ended) == 4
    pairs = [(type(m), m.text) for m in branch.messages]
    assert [text for kind, text in pairs if kind is AssistantResponse] == [
        "one",
        "two",
        "three",
        "four",
    ]
    assert sum(kind is Instruction for kind, _ in pairs) == 4
