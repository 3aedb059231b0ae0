"""The verbs' algorithms. Each runs inside a turn and sees it through a `TurnView`.

An operation is ``async def op(turn, command)``; `execute` dispatches a
work command to its operation. Branch methods and commands only adapt and
delegate here. Nothing here knows the actor runtime: the turn
view (`pride.operations.view`) is the whole interface.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..messages import (
    Act,
    Chat,
    ChatAndRecord,
    Communicate,
    Interpret,
    Operate,
    Parse,
    ReAct,
    ReActStream,
    Run,
    WorkCommand,
)
from .act import act
from .chat import chat, chat_and_record, communicate
from .interpret import interpret
from .operate import operate
from .parse import parse
from .react import react, react_stream
from .results import (
    Analysis as Analysis,
    OperateResult as OperateResult,
    ReActAnalysis as ReActAnalysis,
    Reason as Reason,
    Unparsed as Unparsed,
)
from .run import run
from .view import TurnView as TurnView

__all__ = [
    "OPERATIONS",
    "Analysis",
    "OperateResult",
    "ReActAnalysis",
    "Reason",
    "TurnView",
    "Unparsed",
    "execute",
]

Operation = Callable[[Any, Any], Awaitable[Any]]

OPERATIONS: dict[type[WorkCommand], Operation] = {
    Chat: chat,
    ChatAndRecord: chat_and_record,
    Communicate: communicate,
    Operate: operate,
    Parse: parse,
    Interpret: interpret,
    Act: act,
    ReAct: react,
    ReActStream: react_stream,
    Run: run,
}
"""The operation serving each work command type."""


async def execute(turn: TurnView, command: WorkCommand) -> Any:
    """Run ``command``'s operation in ``turn``.

    Raises:
        TypeError: no operation serves this command type.
    """
    operation = OPERATIONS.get(type(command))
    if operation is None:
        raise TypeError(f"no operation serves {type(command).__name__}")
    return await operation(turn, command)
