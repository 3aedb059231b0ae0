"""OpenTelemetry traces of pride's turns, model calls and tool calls (the ``otel`` extra).

Needs ``pip install 'pride[otel]'``. ``import pride`` never imports this
package or OpenTelemetry; ``pride.telemetry.instrument()`` installs pride's
tracer into the runtime's tracer slot (`pride.actors.instrument`), and from
then on every turn is an ``invoke_agent {branch name}`` span, every model
call a ``chat {model}`` span and every tool call an ``execute_tool {tool
name}`` span, nested as the work nests, with the OpenTelemetry GenAI
semantic conventions' attributes.

```python
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import pride.telemetry

trace.set_tracer_provider(TracerProvider())  # your exporters, as usual
pride.telemetry.instrument()
```

Configuration is OpenTelemetry's own: the application's tracer provider
(the global one, or the one given to `instrument`) and the standard
``OTEL_*`` environment variables. Without a configured provider nothing is
recorded and the turn path pays next to nothing. See docs/observability.md.
"""

from __future__ import annotations

try:
    import opentelemetry.trace as _api  # noqa: F401  (the optional extra; fail here with the fix)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("pride's tracing needs OpenTelemetry: pip install 'pride[otel]'") from exc

from .._public import publish as _publish
from ._content import (
    CONTENT_LIMIT as CONTENT_LIMIT,
    ERROR_LIMIT as ERROR_LIMIT,
    VALUE_LIMIT as VALUE_LIMIT,
)
from ._export import otlp_provider as otlp_provider
from ._tracer import (
    CAPTURE_CONTENT_ENV as CAPTURE_CONTENT_ENV,
    PrideTracer as PrideTracer,
    instrument as instrument,
    instrumented as instrumented,
    uninstrument as uninstrument,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "CONTENT_LIMIT",
    "ERROR_LIMIT",
    "VALUE_LIMIT",
    "PrideTracer",
    "instrument",
    "instrumented",
    "otlp_provider",
    "uninstrument",
]

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
