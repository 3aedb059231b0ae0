"""``pride.client``: a client of ``pride serve``, for asyncio and trio programs, on httpx.

```python title="fragment: in an async function (asyncio or trio)"
from pride import ChatAndRecord
from pride.client import Client

async with Client("http://127.0.0.1:8000", token) as client:
    answer = await client.ask("writer", ChatAndRecord(instruction="A haiku"))
```

* `Client`: ``ask``, ``send``, ``turn``, ``stream``, ``resolve``,
  ``approvals``, ``branches``, ``messages``, ``events``, and ``ref(name)``,
  a target for ``pride.ask/send/stream`` in trio code.
* Errors are pride's own classes (``UnknownBranch``, ``BudgetExceeded``
  with its figures, ``ApprovalRequired`` with its pending calls, ...); a
  refusal with no pride class is a `RequestRefused`; an answer past the
  client's bounds (``max_answer_bytes``, ``max_event_bytes``) an
  `AnswerTooLarge`.

See docs/serve.md.
"""

from __future__ import annotations

from .._public import publish as _publish
from ._client import Client as Client, ServedItems as ServedItems
from ._errors import AnswerTooLarge as AnswerTooLarge, RequestRefused as RequestRefused
from ._ref import ServedBranch as ServedBranch

__all__ = ["AnswerTooLarge", "Client", "RequestRefused", "ServedBranch", "ServedItems"]

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
