"""What the bridge itself raises: a call made where it cannot be served."""

from __future__ import annotations

from ..errors import PrideError

__all__ = ["TeamClosed", "WrongLoop"]


class TeamClosed(PrideError, RuntimeError):
    """The team is closed (or closing): its session no longer takes calls.

    Raised by a call made after the ``async with pride.aio.open_session()``
    block was left (or ``team.aclose()`` was awaited), and by a call still
    running when the team closed and cancelled it. Open a new team to go on.
    """


class WrongLoop(PrideError, RuntimeError):
    """A team was used outside the asyncio event loop (and thread) that opened it.

    pride's trio run is a guest of one loop, in that loop's thread; nothing of
    it is thread-safe. From another thread, hand the call to the team's loop
    with ``asyncio.run_coroutine_threadsafe(team.ask(...), loop)``.

    Also raised by a team's coroutine awaited in trio code of its own run (a
    tool, an operation, a function given to ``team.run``), before it does
    anything: there use the trio API (``await team.session.ask(...)``).
    """
