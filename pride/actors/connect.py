"""Tools from outside the branch: another model (``Branch.connect``, ADR-0016 D5) and
an MCP server's tools (``Branch.register_mcp``), both bound onto Branch as its methods.

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
from typing import TYPE_CHECKING, Any

from ..llm import ModelRequest, iModel
from ..tools import Tool

if TYPE_CHECKING:
    from .branch import Branch

__all__ = [
    "DEFAULT_CAPACITY_REFRESH_TIME",
    "DEFAULT_QUEUE_CAPACITY",
    "ConnectedModel",
    "connect",
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


def connect(
    branch: Branch,
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
    update: bool = False,
    **kwargs: Any,
) -> Tool:
    """Offer another model to the branch's model as a tool (``Branch.connect``, ADR-0016 D5).

    The tool takes ``instruction`` (text), asks the connected model once and
    returns its reply. Give ``imodel=`` or the model's configuration
    (``model="provider/name"``, limits, request options), forwarded to
    [`iModel`][pride.iModel] (queue capacity 100, refresh 60 s by default).

    Args:
        branch: the branch whose action manager gets the tool.
        provider: the connected model's provider (with ``model="provider/name"``
            among ``kwargs``).
        base_url: where the provider is (OpenAI-compatible servers).
        api_key: the key, when it is not in the provider's environment variable.
        endpoint: only ``"chat"`` is supported.
        queue_capacity: forwarded to [`iModel`][pride.iModel] (default 100).
        capacity_refresh_time: forwarded to the iModel (default 60 s).
        limit_requests: the connected model's request limit per window.
        limit_tokens: the connected model's token limit per window.
        imodel: an existing model to connect instead of configuring one.
        name: the tool's name; default ``<provider>_<model>`` (invalid
            characters replaced by ``_``).
        description: what the calling model is told the tool does.
        request_options: options sent with every request (``temperature``, ...).
        update: replace a registered tool of the same name instead of failing.
        **kwargs: further iModel arguments (``model``, ``timeout``, ``retry``, ...).

    Returns:
        the registered [`Tool`][pride.tools.Tool]; its ``function`` is a
        [`ConnectedModel`][pride.actors.connect.ConnectedModel] whose ``imodel`` is the connected
        model.

    Raises:
        ValueError: another endpoint, ``imodel`` together with configuration,
            a bad configuration, or a taken name (unless ``update``).
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

    tool = Tool(ConnectedModel(model), name=tool_name, description=tool_description)
    branch.register_tools(tool, update=update)
    return tool


def register_mcp(
    branch: Branch,
    server: Any,
    *,
    prefix: str | None = None,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> tuple[str, ...]:
    """Register an MCP server's tools (the handle ``session.spawn_mcp`` returned).

    Each tool keeps the server's name and JSON schema, with ``prefix``
    prepended when given; ``include``/``exclude`` pick tools by their
    server names. The registration follows the server: tools it adds,
    changes or drops (``notifications/tools/list_changed``, a restart)
    are updated here. Returns the registered names. See docs/mcp.md.

    Raises:
        TypeError: ``server`` is not an MCP server handle.
        ValueError: a name is already registered, or ``include`` names a
            tool the server does not have.
    """
    register = getattr(server, "register_with", None)
    if register is None:
        raise TypeError(
            f"register_mcp needs the handle session.spawn_mcp(...) returned, "
            f"got {type(server).__name__}"
        )
    names: tuple[str, ...] = register(
        branch._actions, owner=branch.name, prefix=prefix, include=include, exclude=exclude
    )
    return names
