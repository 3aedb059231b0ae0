"""An OTLP exporting tracer provider, for a process that has none of its own (``pride run --otel``).

An application that configures OpenTelemetry itself does not need this:
``pride.telemetry.instrument()`` uses its provider. For a process pride
starts (``pride run APP --otel``), `otlp_provider` builds the SDK provider
every OpenTelemetry setup has: a resource from the standard variables
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``; the service name is
``pride`` unless they say otherwise), and a batch span processor in front of
the OTLP exporter, which reads its own variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_PROTOCOL``, ...). The
batch processor exports from its own thread, so the trio thread never
waits on the collector.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["otlp_provider"]

_INSTALL = "pip install 'pride[otel]' opentelemetry-exporter-otlp-proto-http"


def otlp_provider() -> Any:
    """A new SDK ``TracerProvider`` exporting spans over OTLP (not made global).

    The protocol is ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or
    ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf`` (the default) or
    ``grpc``. Call ``provider.shutdown()`` at exit to flush what is queued.

    Raises:
        ImportError: the SDK or the exporter for the protocol is not
            installed; the message says what to install.
        ValueError: an unknown protocol.
    """
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError(f"--otel needs the OpenTelemetry SDK: {_INSTALL}") from exc
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    exporter: Any
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ImportError(f"--otel needs the OTLP exporter: {_INSTALL}") from exc
        exporter = OTLPSpanExporter()
    elif protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError as exc:
            raise ImportError(
                "--otel over grpc needs its exporter: "
                "pip install opentelemetry-exporter-otlp-proto-grpc"
            ) from exc
        exporter = GrpcExporter()
    else:
        raise ValueError(
            f"unknown OTLP protocol {protocol!r} (OTEL_EXPORTER_OTLP_PROTOCOL): "
            "use 'http/protobuf' or 'grpc'"
        )
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    attributes = {} if named else {SERVICE_NAME: "pride"}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
