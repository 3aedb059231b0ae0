"""The options both network doors take (``pride serve``, ``pride mcp --http``): which
``Host`` and ``Origin`` headers they answer besides their own (`pride.messages.origins`).

Declared once, so the two commands spell and explain them the same way.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias

import typer

__all__ = ["AllowHost", "AllowOrigin"]

AllowHost: TypeAlias = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST",
        show_default=False,
        help="A Host header to accept besides the server's own (a reverse proxy's "
        "name; NAME or NAME:PORT; repeat it). Others are refused (421): DNS rebinding.",
    ),
]

AllowOrigin: TypeAlias = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-origin",
        metavar="ORIGIN",
        show_default=False,
        help="A browser Origin to accept besides the server's own, e.g. "
        "https://chat.example.com (repeat it). Others are refused (403).",
    ),
]
