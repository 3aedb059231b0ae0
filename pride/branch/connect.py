"""Tools from outside the branch: another model (``Branch.connect``) and an MCP
server's tools (``Branch.register_mcp``).

A connected model's tool takes one argument, ``instruction`` (the text to send), calls the
connected model once with it as a single user message, and returns the
model's reply text. The call runs inside the turn that asked for it, through
the connected model's own rate limits and retries; a failure becomes an
error ActionResponse like any tool failure. An MCP server's tools are
registered by its handle (``session.spawn_mcp``), which keeps them in step
with the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..llm import ModelRequest, iModel
from ..tools import ActionManager, Tool

__all__ = [
    "DEFAULT_CAPACITY_REFRESH_TIME",
    "DEFAULT_QUEUE_CAPACITY",
    "ConnectedModel",
    "connected_tool",
    "register_mcp",
]

DEFAULT_QUEUE_CAPACITY = 100
"""Queued calls the connected model admits before callers wait (forwarded to iModel)."""
DEFAULT_CAPACITY_REFRESH_TIME = 60.0
"""Rate-limit window of the connected model, in seconds (forwarded to iModel)."""

_NOT_NAME = re.compile(r"[^a-zA-Z0-9_-]")


class ConnectedModel:
    """The callable behind a connected-model tool (``tool.function``).

    Attributes:
        imodel: the model the tool asks.
    """

    __slots__ = ("imodel",)

    def __init__(self, imodel: iModel) -> None:
        self.imodel = imodel

    def __repr__(self) -> str:
        return f"ConnectedModel({self.imodel!r})"

    async def __call__(self, instruction: str) -> str:
        """Send an instruction to the connected model and return its reply.

        Args:
            instruction: The complete request for the model, as text.
        """
        request = ModelRequest(messages=[{"role": "user", "content": instruction}])
        reply = await self.imodel.invoke(request)
        return reply.text


def connected_tool(
    provider: str | None = None,
    base_url: str | None = None,
    endpoint: str = "chat",
    api_key: str | None = None,
    *,
    queue_capacity: int = DEFAULT_QUEUE_CAPACITY,
    capacity_refresh_time: float = DEFAULT_CAPACITY_REFRESH_TIME,
    limit_requests: int | None = None,
    limit_tokens: int | None = None,
    imodel: iModel | None = None,
    name: str | None = None,
    description: str | None = None,
    request_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Tool:
    """The tool [`Branch.connect`][pride.branch.branch.Branch.connect] registers
    (its arguments, but ``update``, are the same).

    Raises:
        ValueError: another endpoint, ``imodel`` together with configuration,
            or a bad configuration.
        TypeError: ``imodel`` is not an iModel.
    """
    if endpoint != "chat":
        raise ValueError(f"connect supports the 'chat' endpoint only, got {endpoint!r}")
    if imodel is None:
        options = dict(request_options or {})
        model = iModel(
            kwargs.pop("model", None),
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            queue_capacity=queue_capacity,
            capacity_refresh_time=capacity_refresh_time,
            limit_requests=limit_requests,
            limit_tokens=limit_tokens,
            **kwargs,
            **options,
        )
    elif not isinstance(imodel, iModel):
        raise TypeError(f"imodel must be an iModel, got {type(imodel).__name__}")
    else:
        config = {
            "provider": provider,
            "base_url": base_url,
            "api_key": api_key,
            "request_options": request_options,
        }
        given = [key for key, value in config.items() if value]
        if given or kwargs:
            raise ValueError(
                "connect: pass either imodel= or the model's configuration, not both "
                f"(also got {', '.join([*given, *kwargs])})"
            )
        model = imodel
    tool_name = name or _NOT_NAME.sub("_", f"{model.provider}_{model.model}")[:64]
    tool_description = description or (
        f"Ask the {model.provider}/{model.model} model. Send the full instruction as text; "
        "the tool returns the model's reply."
    )

    return Tool(ConnectedModel(model), name=tool_name, description=tool_description)


def register_mcp(
    actions: ActionManager,
    owner: str,
    server: Any,
    *,
    prefix: str | None = None,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> tuple[str, ...]:
    """Register ``server``'s tools in ``actions`` for the branch named ``owner``
    (what [`Branch.register_mcp`][pride.branch.branch.Branch.register_mcp] does).

    Raises:
        TypeError: ``server`` is not an MCP server handle.
        ValueError: a name is already registered, or ``include`` names a tool
            the server does not have.
    """
    register = getattr(server, "register_with", None)
    if register is None:
        raise TypeError(
            f"register_mcp needs the handle session.spawn_mcp(...) returned, "
            f"got {type(server).__name__}"
        )
    names: tuple[str, ...] = register(
        actions, owner=owner, prefix=prefix, include=include, exclude=exclude
    )
    return names
