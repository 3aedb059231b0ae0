"""A loopback OTLP/HTTP collector: what ``pride run --otel`` exports, as the spans it got."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

MAX_BODY = 16 * 1024 * 1024


class Collector:
    """Receives ``POST /v1/traces`` (protobuf) on 127.0.0.1 and keeps every span."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.resources: list[dict[str, Any]] = []
        self.port = 0
        self.received = trio.Event()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def names(self) -> list[str]:
        return [span.name for span in self.spans]

    async def _serve(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        body = b""
        target = b""
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                connection.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                target = event.target
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return
            elif isinstance(event, h11.EndOfMessage):
                status = 404
                if target == b"/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource_spans in request.resource_spans:
                        self.resources.append(
                            {
                                a.key: a.value.string_value
                                for a in resource_spans.resource.attributes
                            }
                        )
                        for scope_spans in resource_spans.scope_spans:
                            self.spans.extend(scope_spans.spans)
                    status = 200
                    self.received.set()
                payload = ExportTraceServiceResponse().SerializeToString()
                headers = [
                    ("content-type", "application/x-protobuf"),
                    ("content-length", str(len(payload))),
                ]
                await stream.send_all(
                    connection.send(h11.Response(status_code=status, headers=headers))
                )
                await stream.send_all(connection.send(h11.Data(data=payload)))
                await stream.send_all(connection.send(h11.EndOfMessage()))
                if connection.our_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
                body, target = b"", b""
            elif isinstance(event, h11.ConnectionClosed):
                return


@asynccontextmanager
async def otlp_collector() -> AsyncIterator[Collector]:
    """A collector serving for the block, in the test's trio loop."""
    collector = Collector()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, collector._serve, 0, host="127.0.0.1")
        )
        collector.port = listeners[0].socket.getsockname()[1]
        try:
            yield collector
        finally:
            nursery.cancel_scope.cancel()
