"""The branch actor: the aggregate, its mailbox, the send API and the turn driver."""

from .actor import HookSink, SignalSink
from .branch import DEFAULT_MAILBOX_SIZE, Branch
from .logs import DataLogger, LogConfig, LogEntry
from .mailbox import MailboxStatistics
from .reply import Reply
from .send import StreamItems, ask, send, send_nowait, stream
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
    "DEFAULT_MAILBOX_SIZE",
    "Branch",
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
    "current_turn",
    "send",
    "send_nowait",
    "stream",
]
