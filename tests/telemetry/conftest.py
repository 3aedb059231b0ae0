"""Traces are checked with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pride.telemetry


class Spans:
    """The spans a test's turns finished, with helpers to walk their tree."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    @property
    def all(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda span: span.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in self.all]}"
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        for candidate in self.all:
            if candidate.context.span_id == span.parent.span_id:
                return candidate
        return None

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return [
            s for s in self.all if s.parent is not None and s.parent.span_id == span.context.span_id
        ]

    def tree(self, span: ReadableSpan, depth: int = 0) -> list[str]:
        """The span's subtree as indented names (the picture docs/observability.md shows)."""
        lines = ["  " * depth + span.name]
        for child in self.children(span):
            lines.extend(self.tree(child, depth + 1))
        return lines


@pytest.fixture
def spans() -> Iterator[Spans]:
    """pride traced into an in-memory exporter for the test, and untraced after it."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pride.telemetry.instrument(provider, capture_content=False)
    try:
        yield Spans(exporter)
    finally:
        pride.telemetry.uninstrument()
        provider.shutdown()
