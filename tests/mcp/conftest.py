"""MCP test fixtures: the example toolbox server (stdio and HTTP) and the hostile fake."""

from __future__ import annotations

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


def fake_command(mode: str) -> list[str]:
    """argv of the misbehaving server in ``mode``."""
    return [sys.executable, str(FAKE), mode]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def toolbox_url() -> Iterator[str]:
    """One streamable-HTTP toolbox on 127.0.0.1, shared by a module's tests."""
    port = free_port()
    process = subprocess.Popen(
        [*toolbox_command(), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # a real server takes its import time to listen: wait for the port
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP toolbox did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
