"""pride in asyncio programs: a Session on trio, run as a guest of the running asyncio loop.

```python
import asyncio

import pride
import pride.aio


async def main() -> None:
    async with pride.aio.open_session(name="team") as team:
        await team.spawn(pride.Branch(name="helper", chat_model=pride.ScriptedModel(["hi"])))
        print(await team.ask("helper", pride.Chat("hello")))


asyncio.run(main())
```

``import pride.aio`` is the only door: ``import pride`` loads neither asyncio
nor this package. Trio runs in the loop's own thread through trio's guest
mode (`trio.lowlevel.start_guest_run`), so the asyncio side and the trio side
share objects without locks; docs/asyncio.md says what that means for you
(one guest run per loop, shared by its teams; a blocking callback blocks
both; close the team before the loop stops).
"""

from __future__ import annotations

from typing import Any

from .._public import publish as _publish
from ._errors import TeamClosed as TeamClosed, WrongLoop as WrongLoop
from ._guest import LINGER as LINGER
from ._stream import Items as Items
from ._team import Sent as Sent, Team as Team

__all__ = ["LINGER", "Items", "Sent", "Team", "TeamClosed", "WrongLoop", "open_session"]


def open_session(**session_kwargs: Any) -> Team:
    """A pride Session for this asyncio loop: ``async with open_session(...) as team:``.

    Inside a running asyncio loop, starts trio as a guest of the loop (one
    guest run per loop, shared by every team opened on it) and a
    [`Session`][pride.Session] in it. Leaving the block stops the session
    with its grace (at once if the block raised) and waits for everything
    of the team to end on both sides; an exception from the block propagates
    after that. ``team = await open_session(...)`` opens it outside a block
    (a notebook's cells); then ``await team.aclose()`` closes it.

    Args:
        **session_kwargs: the [`Session`][pride.Session] arguments (``name``,
            ``strategy``, ``grace``, ``store``, ``budget``...).

    Returns:
        A [`Team`][pride.aio.Team], not yet open.

    Raises (on opening):
        RuntimeError: no asyncio loop is running, or this thread already runs trio.
        TypeError, ValueError: a bad Session argument.
        SupervisorFailed: the session failed; leaving the block raises it, and
            the block's task is cancelled when it happens (as
            ``asyncio.TaskGroup`` does for a failed child).
    """
    return Team(session_kwargs)


# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
