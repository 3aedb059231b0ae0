"""An asyncio program with a pride team and a turn that never ends, to be interrupted (SIGINT).

``python interrupted.py run``: under ``asyncio.run`` (which handles SIGINT itself);
``python interrupted.py plain``: under ``loop.run_until_complete`` with Python's
default SIGINT handler. Prints ``ready`` once the turn runs; what it prints after
that is read by tests/aio/test_signals.py.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import trio

import pride
import pride.aio


async def forever(request: Any) -> str:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


member = pride.Branch(name="slow", chat_model=pride.ScriptedModel(forever))


async def main() -> None:
    try:
        async with pride.aio.open_session() as team:
            await team.spawn(member)
            started = asyncio.Event()
            team.observe(pride.RunStart, handler=lambda signal: started.set())
            team.observe(pride.RunFailed, handler=lambda s: print("terminal", s.error_type))
            asking = asyncio.create_task(team.ask("slow", pride.Chat("never answered")))
            await started.wait()
            print("ready", flush=True)
            await asking
    finally:
        print("block left; branch running:", member.running, flush=True)


if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
    # Started with SIGINT ignored (a background job of a shell without job control
    # passes SIG_IGN on), Ctrl-C would do nothing and the test would wait for nothing:
    # say so at once instead. test_signals.py starts this as a terminal would.
    sys.exit(f"SIGINT was {signal.getsignal(signal.SIGINT)!r} at start, not Python's default")
if sys.argv[1] == "run":
    asyncio.run(main())
else:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        print("loop left; branch running:", member.running, flush=True)
