"""The OpenAI-compatible endpoint: ``GET /v1/models``, ``POST /v1/chat/completions``.

OpenAI's semantics: the request's messages are the conversation, and
nothing is remembered between requests. The branch named by ``model`` is
the agent's definition: its system message (unless the request has one),
its tools, models and budget. Each request runs as a transient clone of it
(``branch.clone()`` with the conversation replaced by the request's
messages), spawned as a temporary member of the root session, so the
session's observer, hooks and budget apply to its turn, and removed when
the answer is sent: nothing is recorded on the branch, and requests to one
agent are not served one after another behind its mailbox (they are bounded
by ``--max-concurrent`` instead). The clone is invisible to the native API.

The turn is a [`Run`][pride.Run] of the last user message (the agent's
tools execute on the server, round after round, until the model answers):
its text chunks are the stream's deltas. A reasoning model's readable
reasoning is ``reasoning_content`` beside ``content`` (the message's field, and
deltas of its own before the answer's), and the usage's
``completion_tokens_details.reasoning_tokens`` counts the output spent
reasoning, withheld (redacted, encrypted) reasoning included: a client is told
what it did not get, never silently short of it. The last message is decoded by the
one decoder of `pride.messages.requests`, so images follow the same trust
rules as everywhere (``data:`` URLs, or under ``--allow-image-url``).
A request cannot add tools (``tools`` must be absent or empty) nor pick a
response format; sampling options (``temperature``, ``max_tokens``, ...) are
passed to the agent's model.

Errors are OpenAI's error body with the status the official SDK maps to its
exception classes: an unknown ``model`` is 404 (``NotFoundError``), a bad
request 400, a budget 429 (``insufficient_quota``), a provider 502.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

import trio

from ..actors import ask, stream
from ..errors import ApprovalRequired, InvalidMessage, UnknownBranch
from ..messages import (
    AssistantResponse,
    Instruction,
    Reasoning,
    ReasoningDelta,
    Run,
    System,
)
from ..messages.requests import decode_command
from ._app import Front
from ._auth import Grant
from ._http import SSE_HEADERS, HttpError, Request, json_bytes, respond_json, watch_disconnect
from ._native import read_body
from ._status import openai_error, status_of

__all__ = ["REASONING_CONTENT", "SAMPLING", "completions", "models"]

SAMPLING = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
    }
)
"""Request fields passed on to the agent's model; other unknown fields are ignored."""

REASONING_CONTENT = "reasoning_content"
"""The message and delta field holding the model's readable reasoning, as vLLM,
DeepSeek and other OpenAI-compatible servers send it (OpenAI's own chat
completions send none); the SDK keeps it as an extra field."""

REMOVE_GRACE = 5.0
"""Seconds the removal of a request's clone may take once its answer is sent."""


def _reachable(front: Front, grant: Grant) -> list[Any]:
    found: list[Any] = []

    def walk(session: Any) -> None:
        for branch in session.branches:
            if branch.id not in front.clones and grant.reaches(branch.name):
                found.append(branch)
        for child in session.sessions:
            walk(child)

    walk(front.session)
    return found


async def models(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/models``: the branches the token reaches, as models."""
    data = [
        {"id": b.name, "object": "model", "created": int(b.created_at), "owned_by": "pride"}
        for b in _reachable(front, grant)
    ]
    await respond_json(request.send, 200, {"object": "list", "data": data})


def _text(content: Any, where: str) -> tuple[str, list[str]]:
    """A message's text and image URLs (``content`` a string or a list of parts)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise InvalidMessage([(f"{where}.content", "expected a string or a list of parts")])
    texts, images = [], []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            url = part["image_url"].get("url")
            if not isinstance(url, str):
                raise InvalidMessage([(f"{where}.content[{index}]", "image_url.url: a string")])
            images.append(url)
        else:
            raise InvalidMessage(
                [(f"{where}.content[{index}]", "expected a text or image_url part")]
            )
    return "\n".join(texts), images


def _conversation(front: Front, body: dict[str, Any]) -> tuple[str | None, list[Any], Run]:
    """The request's system text, its earlier messages, and the turn of its last one."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InvalidMessage([("messages", "expected a non-empty list of messages")])
    options = {key: body[key] for key in SAMPLING if body.get(key) is not None}
    # Joined once at the end: joined as each came, the text so far was copied per
    # message (400,000 short ones, 24 MiB, took 101 s of the event loop).
    systems: list[str] = []
    history: list[Any] = []
    turns: list[Run] = []
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            text, images = _text(message.get("content"), where)
            if history or images:
                raise InvalidMessage([(where, "a system message comes first, as text")])
            systems.append(text)
        elif role == "user":
            text, images = _text(message.get("content"), where)
            data: dict[str, Any] = {"type": "Run", "instruction": text, "images": images}
            if index == len(raw) - 1:
                data["request_options"] = options
            turn = decode_command(data, image_urls=front.options.image_urls, where=where)
            assert isinstance(turn, Run)
            turns.append(turn)
            history.append(Instruction(instruction=turn.instruction, images=turn.images))
        elif role == "assistant":
            if message.get("tool_calls"):
                raise InvalidMessage(
                    [(f"{where}.tool_calls", "the agent's tools run on the server")]
                )
            text, _ = _text(message.get("content"), where)
            history.append(AssistantResponse(assistant_response=text))
        else:
            raise InvalidMessage(
                [(f"{where}.role", "expected system, developer, user or assistant")]
            )
    if not isinstance(raw[-1], dict) or raw[-1].get("role") != "user":
        raise InvalidMessage([("messages", "the last message must be the user's")])
    history.pop()  # the last message is the turn's own instruction
    return ("\n\n".join(systems) if systems else None), history, turns[-1]


def _check(body: Any) -> tuple[str, bool, bool]:
    """The request's ``model``, ``stream`` and ``stream_options.include_usage``."""
    if not isinstance(body, dict):
        raise InvalidMessage([("request", "expected a JSON object")])
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise InvalidMessage([("model", "expected the name of an agent (GET /v1/models)")])
    streamed = body.get("stream", False)
    if not isinstance(streamed, bool):
        raise InvalidMessage([("stream", "expected true or false")])
    if body.get("tools") or body.get("functions"):
        raise InvalidMessage([("tools", "the agent's own tools run on the server; add none")])
    form = body.get("response_format")
    if form is not None and form != {"type": "text"}:
        raise InvalidMessage([("response_format", "only text answers are served")])
    if body.get("n", 1) != 1:
        raise InvalidMessage([("n", "one choice per request")])
    usage = body.get("stream_options") or {}
    return name, streamed, isinstance(usage, dict) and usage.get("include_usage") is True


async def completions(front: Front, request: Request, grant: Grant) -> None:
    """``POST /v1/chat/completions``: one turn of a transient clone (module docstring)."""
    body = await read_body(front, request)
    name, streamed, include_usage = _check(body)
    try:
        branch = await front.lookup(name, grant)
    except UnknownBranch as exc:
        error = HttpError(404, "NotFound", f"{exc}: GET /v1/models lists the agents")
        await respond_json(request.send, 404, openai_error(error, 404, code="model_not_found"))
        return
    system, history, command = _conversation(front, body)
    clone = branch.clone()
    clone.messages.clear(keep_system=system is None)
    if system is not None:
        clone.messages.append(System(system_message=system))
    for message in history:
        clone.messages.append(message)
    assert front.nursery is not None
    answer = _Answer(name)
    async with front.slot():
        front.clones.add(clone.id)
        try:
            await front.session.spawn(clone, restart="temporary")
            with watch_disconnect(request, front.nursery):
                if streamed:
                    await _stream(request, clone, command, answer, include_usage)
                else:
                    try:
                        items = await ask(clone, command)
                    except ApprovalRequired as held:
                        raise _cannot_wait(held, name) from None
                    await respond_json(request.send, 200, answer.whole(items, clone.usage))
        finally:
            with trio.move_on_after(REMOVE_GRACE) as cleanup:
                cleanup.shield = True
                with contextlib.suppress(Exception):
                    await front.session.remove(clone)
            front.clones.discard(clone.id)


def _cannot_wait(held: ApprovalRequired, name: str) -> HttpError:
    """The answer to a completion whose turn stopped for approval.

    The turn was its clone's, removed with the answer: nobody could resolve
    it, so the answer says so rather than how to resolve it (409, never
    retried), and where a turn can wait for a person.
    """
    calls = ", ".join(sorted({call.function for call in held.pending})) or "a tool"
    return HttpError(
        409,
        "ApprovalRequired",
        f"agent {name!r} reached {calls}, which needs a person's approval; the "
        "OpenAI-compatible endpoint cannot wait for one (its turn was abandoned): send "
        f"the work with POST /v1/branches/{name}/send and decide it with "
        "POST /v1/turns/{turn_id}/resolve",
        headers=[(b"x-should-retry", b"false")],
    )


class _Answer:
    """The shapes of one completion's answer (its id, time and model name shared)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def _usage(self, usage: Any) -> dict[str, Any]:
        prompt, completion = usage.input_tokens, usage.output_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            # What of the output went to reasoning, readable or withheld (OpenAI's field).
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        }

    def whole(self, items: Any, usage: Any) -> dict[str, Any]:
        text = next(
            (i.assistant_response for i in reversed(items) if isinstance(i, AssistantResponse)),
            "",
        )
        message: dict[str, Any] = {"role": "assistant", "content": text}
        # Joined as a stream's deltas join, so both modes give a client the same text.
        reasoning = "".join(i.reasoning for i in items if isinstance(i, Reasoning))
        if reasoning:
            message[REASONING_CONTENT] = reasoning
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": self._usage(usage),
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return b"data: " + json_bytes(data) + b"\n\n"

    def usage_chunk(self, usage: Any) -> bytes:
        data = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self._usage(usage),
        }
        return b"data: " + json_bytes(data) + b"\n\n"


async def _stream(
    request: Request, clone: Any, command: Run, answer: _Answer, include_usage: bool
) -> None:
    send = request.send

    async def body(data: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    async with stream(clone, command) as items:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await body(answer.chunk({"role": "assistant", "content": ""}))
        try:
            async for item in items:
                if isinstance(item, str) and item:
                    await body(answer.chunk({"content": item}))
                elif isinstance(item, ReasoningDelta) and item.text:
                    await body(answer.chunk({REASONING_CONTENT: item.text}))
        except Exception as exc:  # the turn failed: OpenAI's form of an error mid-stream
            if isinstance(exc, ApprovalRequired):
                exc = _cannot_wait(exc, answer.model)
            status, _ = status_of(exc)
            await body(b"data: " + json_bytes(openai_error(exc, status)) + b"\n\n")
            await body(b"data: [DONE]\n\n", more=False)
            return
    await body(answer.chunk({}, "stop"))
    if include_usage:
        await body(answer.usage_chunk(clone.usage))
    await body(b"data: [DONE]\n\n", more=False)
