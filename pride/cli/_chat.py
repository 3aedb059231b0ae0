"""``pride chat``: an interactive conversation with one branch, streamed.

The branch runs in a session of its own (with the store when ``--store`` is
given, so every turn is committed as it ends). Lines are read from standard
input in a worker thread, so a terminal, a pseudo-terminal and a pipe all
work; end of input quits. Replies stream as the model produces them.

With no model configured (no ``--model``, no ``PRIDE_CHAT_MODEL`` and no API
key for the default provider), the REPL runs on the scripted echo model and
says so: ``pride chat`` always starts.

``--agent MODULE:FUNCTION`` talks to the application's own branch instead
(``FUNCTION()`` returns it, with its model, tools and system prompt). A
branch with tools takes each line as a [`Run`][pride.Run] turn: tool calls
and their results are shown as they happen, and a call that needs a
person's approval is asked about in the terminal (`pride.cli._approve`).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from rich.console import Console
from rich.text import Text

from ..actors import stream
from ..branch import Branch
from ..errors import (
    ApprovalPending,
    ApprovalRequired,
    AuthenticationFailed,
    PrideError,
    StoreError,
    UnknownBranch,
)
from ..llm import (
    CHAT_MODEL_ENV,
    DEFAULT_CHAT_MODEL,
    RetryNotice,
    ScriptedModel,
    iModel,
)
from ..messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    ChatAndRecord,
    PendingCall,
    Resume,
    Run,
    Usage,
    WorkCommand,
)
from ..supervisors import Session
from ._approve import decide, describe_call
from ._lines import LineReader
from ._loader import AppError, load_agent
from ._startup import cannot_start
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

CHAT_TIMEOUT = 30.0
"""Default seconds of silence allowed from the model (``--timeout``): a person is waiting."""


@attrs.frozen
class ChatOptions:
    """The options of ``pride chat`` (see ``pride chat --help``)."""

    model: str | None = None
    base_url: str | None = None
    system: str | None = None
    store: Path | None = None
    name: str | None = None  # "chat", or the agent's own
    timeout: float = CHAT_TIMEOUT
    agent: str | None = None


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


def describe_model(model: iModel) -> str:
    """The model in words: ``openai/gpt-4.1-mini``, ``the scripted echo model``, or
    ``a scripted model`` (an agent's own script, whose name says nothing)."""
    if model.provider != "scripted":
        return f"{model.provider}/{model.model}"
    return "a scripted model" if model.model == "scripted" else f"the scripted {model.model} model"


def _model(spec: str, base_url: str | None, timeout: float) -> iModel:
    if spec.partition("/")[0] == "scripted":
        return iModel.from_spec(spec)
    return iModel(spec, base_url=base_url, timeout=timeout)


def run_chat(options: ChatOptions) -> int:
    """Run the REPL until ``/quit`` or end of input; return the exit status."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = Console(highlight=False, emoji=False)
    err = Console(stderr=True, highlight=False, emoji=False)
    agent: Branch | None = None
    if options.agent is not None:
        if options.name is not None or options.system is not None:
            return cannot_start(
                "chat",
                "--name and --system do not go with --agent (its branch has its own name "
                "and system prompt)",
            )
        try:
            agent = load_agent(options.agent)
        except AppError as exc:
            return cannot_start("chat", f"--agent: {exc}")
    try:
        if agent is not None and not (options.model or options.base_url):
            model, notice = agent.chat_model, None
        else:
            model, notice = choose_model(options.model, options.base_url, options.timeout)
    except ValueError as exc:
        return cannot_start("chat", str(exc))
    try:
        return trio.run(_main, options, _Chosen(model, notice, agent), out, err)
    except KeyboardInterrupt:  # Ctrl-C while starting or stopping, outside the REPL's watch
        return 128 + signal.SIGINT


@attrs.frozen
class _Chosen:
    """What the REPL starts with: the model (and why, when it fell back), the agent."""

    model: iModel
    notice: str | None
    agent: Branch | None


async def _main(options: ChatOptions, chosen: _Chosen, out: Console, err: Console) -> int:
    try:
        async with Session("pride-chat", store=options.store) as session:
            repl = _Repl(session, chosen.model, out, err)
            with trio.open_signal_receiver(signal.SIGINT) as interrupts:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(repl.watch_interrupts, interrupts, nursery.cancel_scope)
                    await repl.start(options, chosen.notice, chosen.agent)
                    await repl.loop()
                    nursery.cancel_scope.cancel()
            repl.goodbye()
    except StoreError as exc:
        return cannot_start("chat", str(exc))
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
        self._reader = LineReader(sys.stdin.fileno())
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

    async def start(
        self, options: ChatOptions, notice: str | None, agent: Branch | None = None
    ) -> None:
        store = self.session.store
        if agent is None:
            agent = Branch(name=options.name or "chat", system=options.system)
        agent.chat_model = self.model
        name = agent.name
        stored = store is not None and await store.load(name) is not None
        self.branch = await self.session.spawn(agent)
        where = f", store {store.path}" if store is not None else ""
        tools = self.current.tools
        with_tools = f", tools: {', '.join(sorted(tools))}" if tools else ""
        self.say(
            f"pride chat: branch {name!r} on {describe_model(self.model)}{where}{with_tools}",
            "bold",
        )
        if stored:
            self.say(f"continuing the stored conversation ({len(self.current.messages)} messages)")
            if options.system:
                self.say("(--system is ignored: the stored conversation keeps its own)")
        if notice:
            self.say(notice, "yellow")
        self.say("Type /help for commands, /quit to leave.", "dim")
        for waiting in self.session.suspended_turns():  # restored from the store
            if waiting.branch_name == name:
                self.say(f"turn {waiting.turn_id} of an earlier session waits for approval")
                await self.settle(waiting.turn_id, waiting.pending)

    async def loop(self) -> None:
        while True:
            if self._interactive:
                self.out.print(Text("you> ", style="bold cyan"), end="")
            line = await self._reader.readline()
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

    async def watch_interrupts(self, interrupts: Any, repl: trio.CancelScope) -> None:
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
        # A branch with tools runs them (Run: the tool loop, streamed); else a plain chat.
        command = Run(text) if self.current.tools else ChatAndRecord(text)
        stopped = await self._stream(command)
        if isinstance(stopped, ApprovalPending):  # left waiting earlier: decide it first
            self.say("(that line was not sent: a turn of this branch waits for approval)", "dim")
        if stopped is not None:
            await self.settle(stopped.turn_id, stopped.pending)

    async def settle(self, turn_id: Any, pending: Sequence[PendingCall]) -> None:
        """Ask about each pending call, then continue the turn (again while it stops)."""
        while True:
            self.say(f"the turn waits for your approval of {len(pending)} tool call(s):", "yellow")
            for call in pending:
                self.say(f"  {call.call_id}: {describe_call(call)}", "yellow")
            decisions = await decide(pending, self.ask, self.complain)
            if decisions is None:
                self.say(f"turn {turn_id} is left waiting for approval", "yellow")
                return
            stopped = await self._stream(Resume(turn_id, decisions))
            if stopped is None:
                return
            turn_id, pending = stopped.turn_id, stopped.pending

    async def ask(self, question: str) -> str | None:
        """Print ``question``; the next input line is the answer (None: input ended)."""
        self.out.print(Text(question, style="bold yellow"), end="" if self._interactive else "\n")
        return await self._reader.readline()

    async def _stream(self, command: WorkCommand) -> ApprovalRequired | ApprovalPending | None:
        """Run one turn, streaming its reply (and its tool calls); the
        ApprovalRequired it stopped with, if it did."""
        branch = self.current
        before = branch.usage
        line = _ReplyLine(self.out, f"{branch.name}> ")
        if not branch.tools:
            line.open()  # a reply is all there is to wait for: show whose, at once
        with trio.CancelScope() as scope:
            self._turn = scope
            try:
                async with stream(branch, command) as items:
                    async for item in items:
                        if isinstance(item, str):
                            line.text(item)
                        elif isinstance(item, AssistantResponse) and not line.streamed:
                            line.text(item.text)  # a reply that did not stream
                        elif isinstance(item, ActionRequest | ActionResponse):
                            line.close()
                            self.say(_tool_line(item), "dim")
            except (ApprovalRequired, ApprovalPending) as exc:
                line.close()
                self.usage(before)
                return exc
            except Exception as exc:  # a failed turn: say why and keep going
                line.close(force=True)
                if not isinstance(exc, PrideError):
                    log.debug("turn failed", exc_info=exc)
                self.complain(f"error: {type(exc).__name__}: {exc}")
                self.usage(before)
                return None
            finally:
                self._turn = None
        if scope.cancelled_caught:
            line.open()
            self.out.print(Text(" [interrupted]", style="yellow"))
        else:
            line.close(force=True)
        self.usage(before)
        return None

    def usage(self, before: Usage) -> None:
        """What the last turn used, and the conversation so far (tokens, and cost when known)."""
        now = self.current.usage
        spent = Usage(
            now.input_tokens - before.input_tokens,
            now.output_tokens - before.output_tokens,
            None if now.cost_usd is None else now.cost_usd - (before.cost_usd or 0.0),
            now.model_calls - before.model_calls,
            now.tool_calls - before.tool_calls,
        )
        # A turn that used nothing (no model call, or one refused before it was sent,
        # such as for want of a key) has no figures worth a line beside its error.
        if not (spent.input_tokens or spent.output_tokens or spent.cost_usd):
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


class _ReplyLine:
    """The reply being printed: ``name> `` then the model's text (never escape
    codes), opened at the first text and closed before a tool line."""

    def __init__(self, out: Console, prompt: str) -> None:
        self.out = out
        self.prompt = prompt
        self.opened = False
        self.streamed = False  # text of the current reply printed

    def open(self) -> None:
        if not self.opened:
            self.out.print(Text(self.prompt, style="bold green"), end="")
            self.opened = True

    def text(self, text: str) -> None:
        if text:
            self.open()
            self.out.print(shown(text), end="", markup=False, soft_wrap=True)
            self.streamed = True

    def close(self, *, force: bool = False) -> None:
        """End the line (``force``: print the prompt first if nothing was)."""
        if force:
            self.open()
        if self.opened:
            self.out.print()
        self.opened = self.streamed = False


def _tool_line(message: ActionRequest | ActionResponse) -> str:
    if isinstance(message, ActionRequest):
        call = PendingCall("", message.function, dict(message.arguments))
        return f"  [tool call] {describe_call(call)}"
    return f"  [tool result] {shown(message.function)}: {shown(message.result_text)}"
