"""Drive the ``pride`` command as a subprocess from a trio test, with bounded waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from pride.testing import Fault

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "pride.cli"]
TIMEOUT = 60.0
"""Seconds any single wait on a subprocess may take before the test fails: a hang
guard, far above what any wait takes (a second or two). At 20 s, landings at load 10
(five engineers' suites on two cores) failed tests whose process had not yet printed
its first line."""

# Settings of the developer's shell that would change what the CLI does.
_SCRUBBED = (
    "PRIDE_CHAT_MODEL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "COLUMNS",
    "LINES",  # pytest-xdist workers set COLUMNS=80 and LINES=24
    "FORCE_COLOR",
)


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: no model configured, unbuffered output."""
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class CLI:
    """A running ``pride`` process; stdout and stderr are collected line by line."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = trio.Event()
        self._nursery: trio.Nursery | None = None

    @classmethod
    @asynccontextmanager
    async def start(
        cls, *args: str, env: dict[str, str], read_stdout: bool = True, read_stderr: bool = True
    ) -> AsyncIterator[CLI]:
        """Start ``pride *args`` in the repository root; kill it if the block leaves early.

        With ``read_stdout=False`` nothing reads the process's stdout until
        `read_stdout` is called (a client that does not read its answers);
        ``read_stderr=False`` the same for stderr and `read_stderr` (a parent
        that pipes the logs and never reads them)."""
        process = await trio.lowlevel.open_process(
            [*COMMAND, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        cli = cls(process)
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            cli._nursery = nursery
            if read_stdout:
                cli.read_stdout()
            if read_stderr:
                cli.read_stderr()
            try:
                yield cli
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.kill()
                    with trio.move_on_after(TIMEOUT):
                        await process.wait()

    def read_stdout(self) -> None:
        """Start collecting stdout (once; `start` does it unless told not to)."""
        assert self._nursery is not None and self.process.stdout is not None
        self._nursery.start_soon(self._pump, self.process.stdout, self.stdout)

    def read_stderr(self) -> None:
        """Start collecting stderr (once; `start` does it unless told not to)."""
        assert self._nursery is not None and self.process.stderr is not None
        self._nursery.start_soon(self._pump, self.process.stderr, self.stderr)

    async def _pump(self, stream: trio.abc.ReceiveStream, lines: list[str]) -> None:
        pending = b""
        async with stream:
            while data := await stream.receive_some():
                pending += data
                *complete, pending = pending.split(b"\n")
                lines.extend(line.decode() for line in complete)
                self._notify()
        if pending:
            lines.append(pending.decode())
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, condition: Callable[[], Any], what: str) -> Any:
        """Wait (bounded) until ``condition()`` is truthy; return its value."""
        try:
            with trio.fail_after(TIMEOUT):
                while not (found := condition()):
                    await self._changed.wait()
                return found
        except trio.TooSlowError:
            raise AssertionError(f"timed out waiting for {what}\n{self.transcript()}") from None

    async def wait_event(self, event: trio.Event, what: str) -> None:
        """Wait (bounded) for ``event``, set by something other than this process's output."""
        try:
            with trio.fail_after(TIMEOUT):
                await event.wait()
        except trio.TooSlowError:
            raise AssertionError(f"timed out waiting for {what}\n{self.transcript()}") from None

    def transcript(self) -> str:
        """The output so far, for failure messages."""
        return "stdout:\n" + "\n".join(self.stdout) + "\nstderr:\n" + "\n".join(self.stderr)

    # ------------------------------------------------------------ pride run

    async def send(self, request: dict[str, Any] | str) -> None:
        """Write one request line (a dict is sent as JSON)."""
        line = request if isinstance(request, str) else json.dumps(request)
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line.encode() + b"\n")

    async def close_stdin(self) -> None:
        """Close the process's standard input (end of input)."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    def answers(self) -> dict[Any, dict[str, Any]]:
        """Answer lines so far, by request id."""
        found = {}
        for line in self.stdout:
            answer = json.loads(line)
            found[answer["id"]] = answer
        return found

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """Wait for the answer to ``request_id``."""
        result: dict[str, Any] = await self.until(
            lambda: self.answers().get(request_id), f"the answer to {request_id!r}"
        )
        return result

    def logs(self) -> list[dict[str, Any]]:
        """The structured log records so far."""
        return [json.loads(line) for line in self.stderr if line.startswith("{")]

    async def logged(self, text: str) -> dict[str, Any]:
        """Wait for a log record whose message contains ``text``."""
        record: dict[str, Any] = await self.until(
            lambda: next((r for r in self.logs() if text in r["message"]), None),
            f"a log record containing {text!r}",
        )
        return record

    async def exit_code(self) -> int:
        """Wait for the process to exit; return its status."""
        try:
            with trio.fail_after(TIMEOUT):
                return await self.process.wait()
        except trio.TooSlowError:
            raise AssertionError(f"the process did not exit\n{self.transcript()}") from None


def request(request_id: str, to: str, instruction: str) -> dict[str, Any]:
    """A ChatAndRecord request line."""
    command = {"type": "ChatAndRecord", "instruction": instruction}
    return {"id": request_id, "to": to, "command": command}


class HeldModel:
    """A loopback-server script: replies ``re: <text>``; texts starting ``slow`` wait.

    ``held`` is set when a slow request arrives; it is answered once
    ``release`` is set. Texts starting ``fail`` get an HTTP 400.
    """

    def __init__(self) -> None:
        self.held = trio.Event()
        self.release = trio.Event()
        self.waiting: list[str] = []  # the slow texts held now
        self._changed = trio.Event()

    async def __call__(self, body: dict[str, Any]) -> str | Fault:
        text = last_text(body)
        if text.startswith("fail"):
            return Fault.status(400)
        if text.startswith("slow"):
            self.held.set()
            self.waiting.append(text)
            self._changed.set()
            self._changed = trio.Event()
            try:
                await self.release.wait()
            finally:
                self.waiting.remove(text)
        return f"re: {text}"

    async def wait_holding(self, count: int) -> None:
        """Wait (bounded) until ``count`` slow requests are held at once."""
        with trio.fail_after(TIMEOUT):
            while len(self.waiting) < count:
                await self._changed.wait()


def last_text(body: dict[str, Any]) -> str:
    """The last user message of a chat-completions request body."""
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            return str(message["content"])
    return ""


def contents(body: dict[str, Any]) -> list[str]:
    """The text of every message of a chat-completions request body."""
    return [message["content"] for message in body["messages"]]
