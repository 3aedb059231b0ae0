"""MCP test fixtures: the example toolbox server (stdio and HTTP) and the hostile fake."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
TOOLBOX = ROOT / "examples" / "mcp_servers" / "toolbox.py"
FAKE = Path(__file__).parent / "fake_server.py"


def toolbox_command() -> list[str]:
    """argv of the example server over stdio."""
    return [sys.executable, str(TOOLBOX)]


def fake_command(mode: str, *args: str) -> list[str]:
    """argv of the misbehaving server in ``mode`` (with the mode's arguments)."""
    return [sys.executable, str(FAKE), mode, *args]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the block runs.

    The socket is bound but never listens: a connection gets a reset, and no
    other process can take the port meanwhile (a port picked and then closed
    could be served by anyone before the test connects).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def announced_url(process: subprocess.Popen[bytes], prefix: bytes, timeout: float = 30) -> str:
    """The URL a server subprocess prints on stdout (``<prefix>http://...``) once it listens.

    Servers here are started on port 0 and say which port the system gave
    them, so no test guesses a free port that another process could take first.
    """
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise RuntimeError(f"no {prefix!r} line within {timeout} s")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the server exited ({process.wait()}) before {prefix!r}")
            buffer += chunk
    line = buffer.split(b"\n", 1)[0].strip()
    if not line.startswith(prefix):
        raise RuntimeError(f"expected a {prefix!r} line, got {line!r}")
    return line[len(prefix) :].decode()


@pytest.fixture(scope="module")
def toolbox_url() -> Iterator[str]:
    """One streamable-HTTP toolbox on 127.0.0.1 (a port the system chose), shared by a module."""
    process = subprocess.Popen(
        [*toolbox_command(), "--http", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield announced_url(process, b"toolbox: serving on ")
    finally:
        assert process.stdout is not None
        process.stdout.close()
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
