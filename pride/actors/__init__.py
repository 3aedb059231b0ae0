"""The actor runtime: the mailbox, the envelope, the send API, the actor loop and the turn driver.

The Branch aggregate it serves is `pride.branch`, above it.
"""

from .actor import HookSink, SignalSink
from .logs import DataLogger, LogConfig, LogEntry
from .mailbox import MailboxStatistics
from .reply import Reply
from .send import (
    StreamItems,
    ask,
    check_timeout,
    resolve,
    send,
    send_in_line,
    send_nowait,
    stream,
)
from .target import BranchRef, Target
from .turn import (
    LoopControl,
    LoopDirective,
    TurnExecutionContext,
    TurnScope,
    check_control,
    current_turn,
)

__all__ = [
    "BranchRef",
    "DataLogger",
    "HookSink",
    "LogConfig",
    "LogEntry",
    "LoopControl",
    "LoopDirective",
    "MailboxStatistics",
    "Reply",
    "SignalSink",
    "StreamItems",
    "Target",
    "TurnExecutionContext",
    "TurnScope",
    "ask",
    "check_control",
    "check_timeout",
    "current_turn",
    "resolve",
    "send",
    "send_in_line",
    "send_nowait",
    "stream",
]
