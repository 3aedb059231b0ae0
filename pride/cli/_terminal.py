"""Text from outside, made safe to print on a terminal.

A model's reply, a stored conversation or a branch name read from a file may
hold escape sequences: to a terminal they are commands (retitle the window,
clear the screen, hide text, even write the clipboard with OSC 52), not
text. rich drops a few control characters (bell, backspace) but passes
``ESC`` through, so everything the CLI prints that did not come from pride
itself goes through `shown` first: each C0 and C1 control character
except newline and tab, and DEL, is shown as a visible ``\\xNN`` escape.
"""

from __future__ import annotations

__all__ = ["shown"]

_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
    if code not in (0x09, 0x0A)
}


def shown(text: str) -> str:
    """``text`` with its control characters (but newline and tab) made visible."""
    return text.translate(_CONTROLS)
