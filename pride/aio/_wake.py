"""Waking the asyncio loop when a signal arrives, for a host that set no wake-up fd.

A Python signal handler runs in the main thread between bytecodes; when that
thread sleeps in the loop's ``select``, the handler runs and the ``select`` is
retried with the timeout it had (PEP 475). A handler that then schedules its
work with a plain ``loop.call_soon`` leaves that work unrun until something
else wakes the loop. ipykernel's interrupt is such a handler (it cancels the
running cell through tornado's ``add_callback``, which is ``call_soon`` on the
loop's own thread: ipykernel issue 881), and while a pride call waits, trio
sleeps in its I/O thread and nothing else wakes the loop: the interrupt would
take effect only when the call ends, which for a turn that waits on a model
may be never.

`wake_on_signals` closes that gap with public APIs only: a socket pair whose
reading end the loop watches, made the signal wake-up fd
(`signal.set_wakeup_fd`), so every signal wakes the loop and the handler's
callback runs at once. It does so only where nobody set a wake-up fd (asyncio
sets its own for ``loop.add_signal_handler``, uvloop always): a fd the host
set is the host's, and is left as it was.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable

__all__ = ["wake_on_signals"]

# Every pair that is (or was, for a loop abandoned without its guest run's end) the
# wake-up fd, by the writing end's fd: kept open while Python may still write to it, so
# that its fd number cannot be reused by an unrelated file meanwhile.
_pairs: dict[int, tuple[socket.socket, socket.socket]] = {}


def wake_on_signals(loop: asyncio.AbstractEventLoop) -> Callable[[], None] | None:
    """Make every signal wake ``loop``, if this thread may and nobody else does.

    Called in the loop's thread while it runs. Returns the function that undoes
    it (the wake-up fd given back as it is then: to nobody if it is still
    this one, left alone if the host has set its own since), or None when
    nothing was done: not the main thread, a wake-up fd already set, or a loop
    that cannot watch a socket (a proactor loop).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # the main thread of a sub-interpreter
        _close(reader, writer)
        return None
    if previous in _pairs:  # ours, from a loop that was abandoned: no longer needed
        _close(*_pairs.pop(previous))
    elif previous != -1:  # the host's own: give it back, it wakes the loop itself
        signal.set_wakeup_fd(previous)
        _close(reader, writer)
        return None
    try:
        loop.add_reader(reader.fileno(), _drain, reader)
    except NotImplementedError:
        signal.set_wakeup_fd(-1)
        _close(reader, writer)
        return None
    _pairs[writer.fileno()] = (reader, writer)
    mine = writer.fileno()

    def undo() -> None:
        loop.remove_reader(reader.fileno())
        current = signal.set_wakeup_fd(-1)
        if current != mine:  # the host set its own since ours: it stays
            signal.set_wakeup_fd(current)
        _pairs.pop(mine, None)
        _close(reader, writer)

    return undo


def _drain(reader: socket.socket) -> None:
    # The bytes are signal numbers; the handlers got their signals already: waking was all.
    try:
        while reader.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        sock.close()
