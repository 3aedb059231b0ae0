"""``pride serve`` subprocesses on free ports, shared where tests do not interfere.

A server starts in a few seconds (imports, the app), so one serves a whole
test session (`served`), and only the tests that stop, kill or starve a
server start their own (`start_server`). Each is started on port 0 and its
URL read from the line it prints once listening.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from pride.serve import Grant, ServeOptions, Server, Tokens

ROOT = Path(__file__).parent.parent.parent
APP = "tests/serve/app.py:build"
ANNOUNCE = b"pride serve: serving on "  # the documented line (docs/serve.md)

TOKEN = "full-access-token-0123456789"
"""Reaches every branch."""
SCOPED = "support-only-token-0123456789"
"""Reaches ``support-*`` and ``reader`` only."""


@attrs.frozen
class Served:
    """A running server: its URL, its process, and what a request needs."""

    url: str
    process: subprocess.Popen[bytes]
    stderr: Path

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def headers(self, token: str = TOKEN) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def logs(self) -> str:
        return self.stderr.read_text(errors="replace")


def token_file(directory: Path) -> Path:
    path = directory / "tokens.txt"
    path.write_text(f"# test tokens\n{TOKEN}\n\n{SCOPED} support-* reader\n")
    return path


def announced_url(process: subprocess.Popen[bytes], timeout: float = 60) -> str:
    """The URL the server prints on stdout once it listens."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise RuntimeError(f"no {ANNOUNCE!r} line within {timeout} s")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the server exited ({process.wait()}) before listening")
            buffer += chunk
    line = buffer.split(b"\n", 1)[0].strip()
    assert line.startswith(ANNOUNCE), line
    return line[len(ANNOUNCE) :].decode()


@contextlib.contextmanager
def start_server(directory: Path, *args: str, app: str = APP) -> Iterator[Served]:
    """``pride serve APP --port 0 --token-file ... ARGS``, stopped (SIGKILL if need be) after."""
    stderr = directory / f"serve-{time.monotonic_ns()}.log"
    with open(stderr, "wb") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pride.cli",
                "serve",
                app,
                "--port",
                "0",
                "--token-file",
                str(token_file(directory)),
                *args,
            ],
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, "PRIDE_SERVE_TOKEN": ""},
        )
    try:
        yield Served(announced_url(process), process, stderr)
    finally:
        assert process.stdout is not None
        process.stdout.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for every test that leaves it as it found it."""
    with start_server(tmp_path_factory.mktemp("served"), "--keepalive", "0.2") as server:
        yield server


@contextlib.asynccontextmanager
async def in_process(
    session: Any, options: ServeOptions | None = None, *, grace: float = 5.0
) -> AsyncIterator[tuple[Server, str]]:
    """A `Server` of ``session`` in this process (a real hypercorn socket on a free
    loopback port, `TOKEN` its one token): the server and its URL, shut down after."""
    options = options if options is not None else ServeOptions(port=0)
    server = Server(session, options, Tokens([(TOKEN, Grant("test"))]), grace=grace)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.run)
        try:
            yield server, url
        finally:
            server.shutdown()
