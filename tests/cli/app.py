"""The application the CLI tests start with ``pride run``: two branches on the loopback server.

The model's address comes from ``PRIDE_TEST_BASE_URL`` (the test's
:func:`pride.testing.openai_server`).
"""

from __future__ import annotations

import os
import sys

import trio

from pride import Branch, Budget, ChatAndRecord, Escalate, ScriptedModel, Session, iModel
from pride.llm import RetryPolicy, ScriptedReply, Usage


def model() -> iModel:
    """An OpenAI-compatible model on the test's loopback server, without retries."""
    return iModel(
        "openai/test-model",
        base_url=os.environ["PRIDE_TEST_BASE_URL"],
        api_key="test-key",
        retry=RetryPolicy.never(),
    )


async def build(session: Session) -> None:
    """Spawn ``bob`` then ``ada`` (so a shutdown stops ``ada`` first)."""
    await session.spawn(Branch(name="bob", system="You are Bob.", chat_model=model()))
    await session.spawn(Branch(name="ada", system="You are Ada.", chat_model=model()))


def broken(session: Session) -> None:
    """An app that fails while starting."""
    raise RuntimeError("no configuration found")


def takes_nothing() -> Branch:
    """An app function written as an agent function: it takes no session."""
    return Branch(name="ada", chat_model=ScriptedModel())


def crashing(session: Session) -> Branch:
    """A factory returning one branch whose every turn escalates (the root soon fails)."""

    def escalate(request: object) -> str:
        raise Escalate("state corrupted")

    return Branch(name="fragile", chat_model=ScriptedModel(escalate))


async def keyed(session: Session) -> None:
    """One branch whose models read ``OPENAI_API_KEY`` from the environment, and an
    operation that passes its keyword arguments on to ``chat``, as apps do."""

    def offered(name: str) -> iModel:
        return iModel(
            f"openai/{name}", base_url=os.environ["PRIDE_TEST_BASE_URL"], retry=RetryPolicy.never()
        )

    async def relay(branch: Branch, **options: object) -> object:
        return await branch.chat("relayed", **options)

    vault = Branch(name="vault", chat_model=offered("chat-model"), parse_model=offered("parser"))
    vault.register_operation("relay", relay)
    await session.spawn(vault)


async def warm_up(session: Session) -> None:
    """An app whose start runs a turn on a model that reads ``OPENAI_API_KEY``: without
    the key it fails to start (and no request ever leaves the process)."""
    keyless = iModel(
        "openai/test-model", base_url="http://127.0.0.1:9/v1", retry=RetryPolicy.never()
    )
    await session.spawn(Branch(name="writer", chat_model=keyless))
    await session.ask("writer", ChatAndRecord("warm up"))


async def budgeted(session: Session) -> None:
    """One branch whose every turn may make no model call (``Budget(max_model_calls=0)``)."""
    await session.spawn(Branch(name="frugal", chat_model=model(), budget=Budget(max_model_calls=0)))


async def lavish(session: Session) -> None:
    """One branch whose model (the application's own, so trusted) reports a cost of 1e308
    a reply: two replies sum to infinity."""
    reply = ScriptedReply("costly", usage=Usage(1, 1, cached_tokens=0, cost_usd=1e308))
    await session.spawn(Branch(name="lavish", chat_model=ScriptedModel(lambda _: reply)))


async def wordy(session: Session) -> None:
    """One branch, ``wordy``, whose every reply is ``PRIDE_TEST_REPLY_BYTES`` x's."""
    size = int(os.environ["PRIDE_TEST_REPLY_BYTES"])
    await session.spawn(Branch(name="wordy", chat_model=ScriptedModel(lambda _: "x" * size)))


async def wordy_and_stuck_turns(session: Session) -> None:
    """``wordy`` (as `wordy`), and ``sleeper``, whose every turn says so on stderr and
    waits until cancelled."""
    await wordy(session)

    async def never(_: object) -> str:
        print("sleeper: turn running", file=sys.stderr, flush=True)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    await session.spawn(Branch(name="sleeper", chat_model=ScriptedModel(never)))


async def stuck(session: Session) -> None:
    """An app whose start never ends (a dependency that never answers), after spawning
    ``bob`` and saying so on stderr."""
    await session.spawn(Branch(name="bob", chat_model=ScriptedModel(["hi"])))
    print("stuck: starting, and waiting forever", file=sys.stderr, flush=True)
    await trio.sleep_forever()


class Unprintable:
    """A result with no JSON form whose ``str()`` raises (an application's own object)."""

    def __str__(self) -> str:
        raise RuntimeError("no text for this one")


async def unprintable(session: Session) -> None:
    """One branch, ``ops``, whose operation ``make`` returns an `Unprintable`."""

    async def make(branch: Branch, **options: object) -> Unprintable:
        return Unprintable()

    ops = Branch(name="ops", chat_model=ScriptedModel(["still here"]))
    ops.register_operation("make", make)
    await session.spawn(ops)
