"""What users need to test their own agents without a network.

- [`openai_server`][pride.testing.openai_server]: a real HTTP server on 127.0.0.1 speaking the
  OpenAI chat-completions and Responses APIs and the Anthropic Messages API
  (plain and streaming) from a script, with faults on demand
  ([`Fault`][pride.testing.Fault]).
- [`pride.llm.ScriptedModel`][pride.ScriptedModel] (in [`pride.llm`][pride.llm]) is the in-process
  alternative when no HTTP is wanted.

```python
from pride.llm import iModel, ModelRequest, RetryPolicy
from pride.testing import Fault, openai_server

async def test_my_agent_survives_a_429():
    async with openai_server([Fault.status(429, retry_after=0), "hi"]) as server:
        async with iModel("openai/test", base_url=server.base_url, api_key="k") as model:
            reply = await model.invoke(ModelRequest([{"role": "user", "content": "x"}]))
    assert reply.text == "hi" and server.request_count == 2
```
"""

from .._public import publish as _publish
from ._faults import Fault as Fault
from ._server import (
    LoopbackServer as LoopbackServer,
    RecordedRequest as RecordedRequest,
    openai_server as openai_server,
)

__all__ = ["Fault", "LoopbackServer", "RecordedRequest", "openai_server"]

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
