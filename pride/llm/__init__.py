"""Model access: iModel, its endpoints, streaming, rate limits, retries, the scripted model.

```python
from pride.llm import iModel, ModelRequest

async with iModel("openai/gpt-4.1-mini", temperature=0) as model:
    reply = await model.invoke(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
    async with model.stream(ModelRequest(messages=[...])) as stream:
        async for delta in stream:
            ...
    usage = stream.response.usage
```

This package imports nothing of pride but [`pride.errors`][pride.errors].
"""

from .._public import publish as _publish
from ..messages import Usage as Usage
from ._client import DEFAULT_HTTP_LIMITS as DEFAULT_HTTP_LIMITS
from ._errors import parse_retry_after as parse_retry_after
from ._limiter import LimiterStatistics as LimiterStatistics, RateLimiter as RateLimiter
from ._listen import retry_listener as retry_listener
from ._model import (
    DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT,
    DEFAULT_TIMEOUT as DEFAULT_TIMEOUT,
    ScriptedModel as ScriptedModel,
    default_chat_model as default_chat_model,
    iModel as iModel,
)
from ._providers import (
    CHAT_MODEL_ENV as CHAT_MODEL_ENV,
    DEFAULT_CHAT_MODEL as DEFAULT_CHAT_MODEL,
)
from ._reading import LimitExceeded as LimitExceeded, ResponseLimits as ResponseLimits
from ._retry import RetryNotice as RetryNotice, RetryPolicy as RetryPolicy
from ._script import KEEP_CALLS as KEEP_CALLS, echo_text as echo_text
from ._sse import SseParser as SseParser
from ._stream import ModelStream as ModelStream
from ._tokens import (
    CHARS_PER_TOKEN as CHARS_PER_TOKEN,
    estimate_text_tokens as estimate_text_tokens,
    load_encoding as load_encoding,
)
from ._types import (
    ModelRequest as ModelRequest,
    ModelResponse as ModelResponse,
    ModelStatistics as ModelStatistics,
    ScriptedReply as ScriptedReply,
    ToolCall as ToolCall,
    new_call_id as new_call_id,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "CHAT_MODEL_ENV",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CHAT_MODEL",
    "DEFAULT_HTTP_LIMITS",
    "DEFAULT_TIMEOUT",
    "KEEP_CALLS",
    "LimitExceeded",
    "LimiterStatistics",
    "ModelRequest",
    "ModelResponse",
    "ModelStatistics",
    "ModelStream",
    "RateLimiter",
    "ResponseLimits",
    "RetryNotice",
    "RetryPolicy",
    "ScriptedModel",
    "ScriptedReply",
    "SseParser",
    "ToolCall",
    "Usage",
    "default_chat_model",
    "echo_text",
    "estimate_text_tokens",
    "iModel",
    "load_encoding",
    "new_call_id",
    "parse_retry_after",
    "retry_listener",
]

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
