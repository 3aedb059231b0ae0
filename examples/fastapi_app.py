"""A FastAPI app that keeps a pride team in its lifespan: one endpoint asks, one streams.

``python examples/fastapi_app.py``: serves the app with uvicorn on a free
loopback port, asks it and streams from it with httpx, and stops.
``uvicorn --app-dir examples fastapi_app:app``: serves it until Ctrl-C or SIGTERM.

The team (`pride.aio.open_session`) is a pride Session run by trio as a guest
of uvicorn's asyncio loop, in the same thread: opened when the app starts,
closed (its members stopped with the session's grace) when the app shuts
down. Its one member answers on the scripted model, so no API key is needed.

* ``POST /ask`` with ``{"question": "..."}`` answers ``{"answer": "..."}``.
* ``POST /stream`` answers the same question as server-sent events: one
  ``chunk`` event per piece of text as the turn produces it, then ``done``.

The events are FastAPI's own (``fastapi.sse``, FastAPI 0.135 and later), so
the server needs no other SSE package; the client half below reads them with
``httpx-sse``. A client that goes away mid-stream closes the
stream, which cancels the turn (it ends with its terminal signal).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from httpx_sse import aconnect_sse
from pydantic import BaseModel

import pride
import pride.aio
from pride.llm import ModelRequest


def librarian(request: ModelRequest) -> str:
    """A stand-in model: answers any question with the same kind of sentence."""
    question = str(request.messages[-1]["content"]).strip().rstrip("?")
    return f"On '{question}': the catalogue has three books, and the second is the best."


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's life is the team's: opened before the first request, closed after the last."""
    async with pride.aio.open_session(name="web") as team:
        model = pride.ScriptedModel(librarian, chunk_size=12)
        member = await team.spawn(pride.Branch(name="librarian", chat_model=model))
        app.state.team = team
        yield
    print("pride team closed; the librarian still running:", member.running, flush=True)


app = FastAPI(title="pride librarian", lifespan=lifespan)


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


@app.post("/ask")
async def ask(body: Question, request: Request) -> Answer:
    """One turn of the librarian; the answer once it is complete."""
    team: pride.aio.Team = request.app.state.team
    return Answer(answer=await team.ask("librarian", pride.Chat(body.question)))


@app.post("/stream", response_class=EventSourceResponse)
async def stream(body: Question, request: Request) -> AsyncIterator[ServerSentEvent]:
    """The same turn, each piece of text sent as an event as the turn produces it."""
    team: pride.aio.Team = request.app.state.team
    async with team.stream("librarian", pride.Chat(body.question)) as chunks:
        async for chunk in chunks:
            yield ServerSentEvent(event="chunk", data=chunk)
    yield ServerSentEvent(event="done", data=str(chunks.turn_id))


async def serve_once() -> None:
    """Serve the app on a free port, ask it and stream from it once, then stop it."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        # The socket listens already: a request waits in its backlog until the app is up.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            question = {"question": "Which book on trio should I read?"}
            answer = (await client.post("/ask", json=question)).raise_for_status().json()
            print("asked:", answer["answer"])
            print("streamed: ", end="")
            async with aconnect_sse(client, "POST", "/stream", json=question) as events:
                events.response.raise_for_status()
                async for event in events.aiter_sse():
                    data = json.loads(event.data)  # FastAPI sends each event's data as JSON
                    print(f"[{data}]" if event.event == "chunk" else f"\n(turn {data})", end="")
            print()
    finally:
        server.should_exit = True  # what SIGTERM does: finish the requests, then the lifespan
        await serving
        listener.close()


if __name__ == "__main__":
    asyncio.run(serve_once())
