"""The streamable-HTTP transport: the SDK's client over one pooled httpx client.

The SDK's ``streamable_http_client`` does the protocol (POST per message, the
session id header, SSE response streams, the DELETE on close). pride hands it
one `httpx.AsyncClient` per incarnation, so requests reuse pooled
keep-alive connections instead of opening a TCP connection each (measured:
without a shared client the SDK connects per request), with the spec's
headers and no redirect following beyond what the SDK allows (same origin).

A failed POST of a request (connection refused, reset) escapes the SDK's
task group; it arrives here as an exception group and becomes one
`McpServerError`: the connection broke, a crash of the child.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp.client.streamable_http import streamable_http_client

from ._spec import McpServerSpec

__all__ = ["HTTP_TIMEOUT", "http_transport"]

HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""The SDK's recommended timeouts: 30 s to connect and write, 300 s to read (SSE streams idle)."""


@contextlib.asynccontextmanager
async def http_transport(spec: McpServerSpec) -> AsyncIterator[tuple[Any, Any]]:
    """Connect to ``spec.url``; yield ``(read_stream, write_stream)`` for a ClientSession."""
    assert spec.url is not None
    async with (
        httpx.AsyncClient(
            headers=dict(spec.headers or {}), timeout=HTTP_TIMEOUT, follow_redirects=False
        ) as client,
        streamable_http_client(spec.url, http_client=client) as (read, write, _session_id),
    ):
        yield read, write
