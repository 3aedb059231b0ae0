"""Text from outside, made safe to print on a terminal.

A model's reply, a stored conversation or a branch name read from a file may
hold escape sequences: to a terminal they are commands (retitle the window,
clear the screen, hide text, even write the clipboard with OSC 52), not
text. rich drops a few control characters (bell, backspace) but passes
``ESC`` through, so everything the CLI prints that did not come from pride
itself goes through `shown` first: each C0 and C1 control character
except newline and tab, and DEL, is shown as a visible ``\\xNN`` escape.

What a person approves is held to more: `shown_exactly` also escapes every
character that prints as nothing or as something else (Unicode's format
characters, such as a right-to-left override, a zero-width space or a tag
character, line and paragraph separators, spaces other than the plain one,
unassigned and private-use code points), so the text read is the text run.
"""

from __future__ import annotations

import unicodedata

__all__ = ["shown", "shown_exactly"]

_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
    if code not in (0x09, 0x0A)
}


def shown(text: str) -> str:
    """``text`` with its control characters (but newline and tab) made visible."""
    return text.translate(_CONTROLS)


_HIDING = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Unicode categories whose characters can hide or disguise text."""


def shown_exactly(text: str) -> str:
    """``text`` with every character that could hide or disguise what it says
    shown as an escape (``\\u202e``, ``\\U000e0041``); the plain space stays.

    For text a person decides on (a tool call's arguments before approving it):
    a right-to-left override makes ``gpj.exe`` read ``exe.jpg``, and a Unicode
    tag character is invisible ASCII. Emoji joined by a zero-width joiner lose
    their look here, which a decision can afford.
    """
    return "".join(_escaped(character) for character in text)


def _escaped(character: str) -> str:
    if character == " " or unicodedata.category(character) not in _HIDING:
        return character
    code = ord(character)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
