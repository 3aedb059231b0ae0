"""The root of pride's exception tree and the codec's error.

They live here, not in [`pride.errors`][pride.errors], because ``pride.messages`` imports
nothing else of pride (it is the bottom layer); [`pride.errors`][pride.errors] re-exports
both and builds the rest of the hierarchy on [`PrideError`][pride.PrideError].
"""

from __future__ import annotations

__all__ = ["InvalidMessage", "PrideError"]


class PrideError(Exception):
    """Base class of every exception pride raises on purpose."""


class InvalidMessage(PrideError, ValueError):
    """Data could not be turned into a pride message, command or signal.

    ``path`` names the offending place (``"Chat.instruction"``) and ``reason``
    says what was wrong there; ``str(exc)`` is ``"<path>: <reason>"``, one line
    per problem when there were several.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        self.path, self.reason = problems[0]
        super().__init__("\n".join(f"{path}: {reason}" for path, reason in problems))
