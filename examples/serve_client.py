"""A served agent and its clients: ``pride serve`` in a subprocess, called from asyncio.

``python examples/serve_client.py``

The agent below (on the scripted model: no API key) is served by ``pride
serve examples/serve_client.py:build`` on a free port; the program reads the
URL the server prints, then talks to it from an asyncio program, as a
FastAPI handler would: `pride.client.Client` for the native API (an ask, a
stream, an error as pride's own class), and the official ``openai`` SDK, if
installed, for the OpenAI-compatible endpoint. SIGTERM then drains the
server, which exits 0.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from pride import Branch, ChatAndRecord, Run, ScriptedModel, Session, UnknownBranch
from pride.client import Client
from pride.llm import ModelRequest

ANNOUNCE = "pride serve: serving on "


def haiku(request: ModelRequest) -> str:
    """A stand-in model: a haiku about whatever it was asked."""
    topic = str(request.messages[-1]["content"]).strip().rstrip(".")
    return f"{topic}, softly -\nan agent behind a port\nanswers every call"


async def build(session: Session) -> None:
    """The tree ``pride serve`` serves: one agent, ``poet``."""
    await session.spawn(Branch(name="poet", chat_model=ScriptedModel(haiku, chunk_size=8)))


async def use(url: str, token: str) -> None:
    """What a client on asyncio does with the served agent."""
    async with Client(url, token) as client:
        print(await client.ask("poet", ChatAndRecord(instruction="Autumn rain")))
        async with client.stream("poet", Run(instruction="Morning fog")) as items:
            async for item in items:
                if isinstance(item, str):
                    print(item, end="", flush=True)
        print()
        try:
            await client.ask("painter", ChatAndRecord(instruction="A still life"))
        except UnknownBranch as exc:
            print(f"as in process: {type(exc).__name__}")
        print(f"poet has {len(await client.messages('poet'))} messages")
    try:
        import openai
    except ImportError:
        return
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=token) as sdk:
        answer = await sdk.chat.completions.create(
            model="poet", messages=[{"role": "user", "content": "A quiet server"}]
        )
        text = answer.choices[0].message.content or ""
        print(f"openai SDK: {text.splitlines()[0]}")


def main() -> int:
    token = secrets.token_urlsafe(24)
    here = Path(__file__)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pride.cli",
            "serve",
            f"{here}:build",
            "--port",
            "0",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PRIDE_SERVE_TOKEN": token},
    )
    assert server.stdout is not None
    try:
        line = server.stdout.readline()
        if not line.startswith(ANNOUNCE):
            print(f"the server did not start: {line!r}", file=sys.stderr)
            return 1
        asyncio.run(use(line.removeprefix(ANNOUNCE).strip(), token))
    finally:
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=30)
    print(f"the server drained and exited {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
