"""``pride chat``: an interactive conversation with one branch, streamed.

The branch runs in a session of its own (with the store when ``--store`` is
given, so every turn is committed as it ends). Lines are read from standard
input in a worker thread, so a terminal, a pseudo-terminal and a pipe all
work; end of input quits. Replies stream as the model produces them.

With no model configured (no ``--model``, no ``PRIDE_CHAT_MODEL`` and no API
key for the default provider), the REPL runs on the scripted echo model and
says so: ``pride chat`` always starts.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import attrs
import trio
from rich.console import Console
from rich.text import Text

from ..actors import Branch, stream
from ..errors import AuthenticationFailed, PrideError, StoreError, UnknownBranch
from ..llm import (
    CHAT_MODEL_ENV,
    DEFAULT_CHAT_MODEL,
    RetryNotice,
    ScriptedModel,
    iModel,
)
from ..messages import ChatAndRecord, Usage
from ..supervisors import Session
from ._lines import LineReader
from ._status import describe_usage
from ._terminal import shown

__all__ = ["COMMANDS", "ChatOptions", "choose_model", "run_chat"]

log = logging.getLogger("pride.cli")

COMMANDS = {
    "/save": "save this conversation to the store (with --store, turns are also saved as they end)",
    "/load NAME": "continue the conversation NAME (open here or stored), keeping the current model",
    "/clone": "fork this conversation into a new branch and continue on the fork",
    "/quit": "leave (so do end of input and Ctrl-C at the prompt)",
    "/help": "this list",
}
"""The REPL's commands and what they do (``/help`` prints this)."""

EXIT_USAGE = 2
"""Exit status for a bad ``--model`` or a store that cannot be used."""

CHAT_TIMEOUT = 30.0
"""Default seconds of silence allowed from the model (``--timeout``): a person is waiting."""


@attrs.frozen
class ChatOptions:
    """The options of ``pride chat`` (see ``pride chat --help``)."""

    model: str | None = None
    base_url: str | None = None
    system: str | None = None
    store: Path | None = None
    name: str = "chat"
    timeout: float = CHAT_TIMEOUT


def choose_model(
    spec: str | None, base_url: str | None, timeout: float = CHAT_TIMEOUT
) -> tuple[iModel, str | None]:
    """The chat model, and a notice when pride fell back to the echo model.

    ``spec`` (``--model``) wins, then ``$PRIDE_CHAT_MODEL``; both are used as
    given (a missing key is reported at the first turn), at ``base_url``
    when one is given. Otherwise the default provider's model is used when
    its API key is set, else the scripted echo model. ``timeout`` is the
    model's per-operation timeout (``--timeout``).

    Raises:
        ValueError: an unknown provider without ``base_url``, or a bad spec.
    """
    configured = os.environ.get(CHAT_MODEL_ENV, "").strip()
    if base_url and not spec:  # a server address alone: the configured model's name, there
        spec = configured or DEFAULT_CHAT_MODEL
    if spec:
        return _model(spec, base_url, timeout), None
    if configured:
        return _model(configured, None, timeout), None
    model = _model(DEFAULT_CHAT_MODEL, None, timeout)
    try:
        model.api_key()
    except AuthenticationFailed:
        key = model.key_env
        notice = (
            f"No model configured (no --model, no {CHAT_MODEL_ENV}, no {key}): running on the "
            "scripted echo model, which repeats what you say. Give --model provider/name or "
            f"set {CHAT_MODEL_ENV} (and the provider's key) to talk to a real model."
        )
        return ScriptedModel(model="echo"), notice
    return model, None


def _model(spec: str, base_url: str | None, timeout: float) -> iModel:
    if spec.partition("/")[0] == "scripted":
        return iModel.from_spec(spec)
    return iModel(spec, base_url=base_url, timeout=timeout)


def run_chat(options: ChatOptions) -> int:
    """Run the REPL until ``/quit`` or end of input; return the exit status."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = Console(highlight=False, emoji=False)
    err = Console(stderr=True, highlight=False, emoji=False)
    try:
        model, notice = choose_model(options.model, options.base_url, options.timeout)
    except ValueError as exc:
        err.print(f"pride chat: {exc}", style="red", markup=False, soft_wrap=True)
        return EXIT_USAGE
    try:
        return trio.run(_main, options, model, notice, out, err)
    except KeyboardInterrupt:  # Ctrl-C while starting or stopping, outside the REPL's watch
        return 128 + signal.SIGINT


async def _main(
    options: ChatOptions, model: iModel, notice: str | None, out: Console, err: Console
) -> int:
    try:
        async with Session("pride-chat", store=options.store) as session:
            repl = _Repl(session, model, out, err)
            await repl.start(options, notice)
            await repl.loop()
    except StoreError as exc:
        err.print(f"pride chat: {exc}", style="red", markup=False, soft_wrap=True)
        return EXIT_USAGE
    return 0


class _Repl:
    def __init__(self, session: Session, model: iModel, out: Console, err: Console) -> None:
        self.session = session
        self.model = model
        self.out = out
        self.err = err
        self.branch: Branch | None = None
        self._turn: trio.CancelScope | None = None
        self._interactive = sys.stdin.isatty()
        model.on_retry = self.retrying

    def retrying(self, notice: RetryNotice) -> None:
        """Say why the reply is late, while the model waits to retry."""
        self.err.print(Text(f"[{notice.message}]", style="yellow"), soft_wrap=True)

    @property
    def current(self) -> Branch:
        assert self.branch is not None
        return self.branch

    def say(self, text: str, style: str = "") -> None:
        self.out.print(Text(shown(text), style=style), soft_wrap=True)

    def complain(self, text: str) -> None:
        self.err.print(Text(shown(text), style="red"), soft_wrap=True)

    async def start(self, options: ChatOptions, notice: str | None) -> None:
        store = self.session.store
        stored = store is not None and await store.load(options.name) is not None
        self.branch = await self.session.spawn(
            Branch(name=options.name, system=options.system, chat_model=self.model)
        )
        where = f", store {store.path}" if store is not None else ""
        self.say(
            f"pride chat: branch {options.name!r} on {self.model.provider}/{self.model.model}"
            f"{where}",
            "bold",
        )
        if stored:
            self.say(f"continuing the stored conversation ({len(self.current.messages)} messages)")
            if options.system:
                self.say("(--system is ignored: the stored conversation keeps its own)")
        if notice:
            self.say(notice, "yellow")
        self.say("Type /help for commands, /quit to leave.", "dim")

    async def loop(self) -> None:
        reader = LineReader(sys.stdin.fileno())
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_interrupts, interrupts, nursery.cancel_scope)
                while True:
                    if self._interactive:
                        self.out.print(Text("you> ", style="bold cyan"), end="")
                    line = await reader.readline()
                    if line is None:
                        break
                    line = line.strip()
                    if not line:
                        continue
                    if line.startswith("/"):
                        try:
                            if not await self.command(line):
                                break
                        except Exception as exc:  # a failed command: say why and keep going
                            log.debug("command %s failed", line, exc_info=exc)
                            self.complain(f"{line}: {type(exc).__name__}: {exc}")
                    else:
                        await self.turn(line)
                nursery.cancel_scope.cancel()
        self.goodbye()

    async def _watch_interrupts(self, interrupts: Any, repl: trio.CancelScope) -> None:
        async for _ in interrupts:
            if self._turn is not None:
                self._turn.cancel()  # Ctrl-C during a reply interrupts the reply
            else:
                self.out.print()
                repl.cancel()  # at the prompt it quits

    def goodbye(self) -> None:
        store = self.session.store
        if store is not None:
            self.say(f"Saved in {store.path} (see: pride inspect {store.path}).", "dim")

    async def turn(self, text: str) -> None:
        branch = self.current
        before = branch.usage
        self.out.print(Text(f"{branch.name}> ", style="bold green"), end="")
        with trio.CancelScope() as scope:
            self._turn = scope
            try:
                async with stream(branch, ChatAndRecord(text)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, str):  # a model's text: never escape codes
                            self.out.print(shown(chunk), end="", markup=False, soft_wrap=True)
            except Exception as exc:  # a failed turn: say why and keep going
                self.out.print()
                if not isinstance(exc, PrideError):
                    log.debug("turn failed", exc_info=exc)
                self.complain(f"error: {type(exc).__name__}: {exc}")
                self.usage(before)
                return
            finally:
                self._turn = None
        self.out.print(Text(" [interrupted]" if scope.cancelled_caught else "", style="yellow"))
        self.usage(before)

    def usage(self, before: Usage) -> None:
        """What the last turn used, and the conversation so far (tokens, and cost when known)."""
        now = self.current.usage
        spent = Usage(
            now.input_tokens - before.input_tokens,
            now.output_tokens - before.output_tokens,
            None if now.cost_usd is None else now.cost_usd - (before.cost_usd or 0.0),
        )
        if not now.model_calls - before.model_calls:
            return
        self.say(f"  [{describe_usage(spent)}; so far: {describe_usage(now)}]", "dim")

    async def command(self, line: str) -> bool:
        """Run one slash command; False means quit."""
        word, _, argument = line.partition(" ")
        argument = argument.strip()
        if word in ("/quit", "/exit"):
            return False
        if word == "/help":
            for usage, what in COMMANDS.items():
                self.say(f"  {usage:<11} {what}")
        elif word == "/save":
            await self.save()
        elif word == "/load":
            if not argument:
                self.complain("usage: /load NAME")
            else:
                await self.load(argument)
        elif word == "/clone":
            await self.clone()
        else:
            self.complain(f"unknown command {word}; /help lists the commands")
        return True

    async def save(self) -> None:
        store = self.session.store
        branch = self.current
        if store is None:
            self.complain("no store: start pride chat with --store PATH to save conversations")
            return
        try:
            await store.save(branch)
        except StoreError as exc:
            self.complain(f"not saved: {exc}")
            return
        self.say(f"saved {branch.name!r}: {len(branch.messages)} messages in {store.path}")

    async def load(self, name: str) -> None:
        if name == self.current.name:
            self.say(f"already on {name!r}")
            return
        try:
            branch = self.session.get_branch(name)
        except UnknownBranch:
            store = self.session.store
            if store is None:
                self.complain(f"no conversation {name!r} here, and no store to load it from")
                return
            if await store.load(name) is None:
                known = ", ".join(b.name for b in await store.branches()) or "none"
                self.complain(f"no conversation {name!r} in {store.path} (stored: {known})")
                return
            branch = await self.session.spawn(Branch(name=name, chat_model=self.model))
        self.branch = branch
        self.say(f"now on {name!r}: {len(branch.messages)} messages", "bold")
        for message in list(branch.messages)[-2:]:
            if message.role in ("user", "assistant"):
                self.say(f"  {message.role}: {message.text}", "dim")

    async def clone(self) -> None:
        source = self.current
        fork = source.clone()
        name = await self._fresh_name(source.name)
        branch = Branch(
            name=name,
            id=fork.id,
            user=fork.user,
            messages=list(fork.messages),
            chat_model=self.model,
            metadata=fork.metadata,
        )
        await self.session.spawn(branch)
        self.branch = branch
        self.say(
            f"forked {source.name!r} into {name!r} ({len(branch.messages)} messages); "
            f"continuing on {name!r} (/load {source.name} goes back)",
            "bold",
        )

    async def _fresh_name(self, name: str) -> str:
        taken = {branch.name for branch in self.session.branches}
        store = self.session.store
        if store is not None:
            taken.update(stored.name for stored in await store.branches())
        root = re.sub(r"-\d+$", "", name)
        number = 2
        while f"{root}-{number}" in taken:
            number += 1
        return f"{root}-{number}"
