"""The record of one executed tool call."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["ActionOutcome"]


@attrs.frozen(kw_only=True)
class ActionOutcome:
    """What happened to one tool call: its output, or the error the model will see.

    A failed call is an outcome too (the tool raised, the name was unknown, the
    arguments were invalid, or ``before_call`` denied it), so the model can be
    shown what went wrong and try again.
    """

    function: str
    """The tool name the call asked for."""
    arguments: dict[str, Any] = attrs.field(factory=dict)
    """The arguments as the call gave them (before validation and conversion)."""
    call_id: str | None = None
    """The provider's tool-call id, when the model called natively."""
    output: Any = None
    """What the tool returned; None when it failed."""
    error: str | None = None
    """None on success; else ``"<ExcType>: <message>"``, or ``"denied: <message>"``
    when ``before_call`` refused the call."""
    started_at: float = 0.0
    """When the call started, by `trio.current_time`."""
    duration: float = 0.0
    """Seconds from start to outcome, on the trio clock (hooks excluded)."""
    exception: Exception | None = attrs.field(default=None, eq=False, repr=False)
    """The exception behind ``error``, for logging. Live only: never serialised."""

    @property
    def succeeded(self) -> bool:
        """True when the tool returned; False when it failed or was denied."""
        return self.error is None
