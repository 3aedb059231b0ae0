"""click's usage errors, and the usage line, in pride's words.

A command's usage line names its arguments as its help does
(``pride run [OPTIONS] APP``), and a usage error click finds while parsing
becomes the one line every startup error is (`cannot_start`).
"""

from __future__ import annotations

from collections.abc import Sequence

import typer
import typer.core

from ._startup import cannot_start

__all__ = ["ClickException", "PlainUsage", "UsageError", "usage_error"]

# typer re-exports click's BadParameter (from its own copy of click since typer 0.2x,
# from click before); its bases are that click's UsageError and ClickException.
UsageError: type[Exception] = typer.BadParameter.__bases__[0]
ClickException: type[Exception] = UsageError.__bases__[0]


class PlainUsage(typer.core.TyperCommand):
    """A command whose usage line names its arguments as the help does:
    ``pride run [OPTIONS] APP`` (typer writes a required one as ``{APP}``)."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = param.metavar or (param.name or "").upper()
            name = name if param.required else f"[{name}]"
            pieces.append(name + ("..." if param.nargs != 1 else ""))
        return pieces


def usage_error(exc: Exception, commands: Sequence[str]) -> int:
    """click's usage error ``exc`` as one line on stderr; returns exit status 2.

    Args:
        exc: the `UsageError` click raised.
        commands: the command names, listed when none was recognised.
    """
    ctx = getattr(exc, "ctx", None)
    message = exc.format_message()  # type: ignore[attr-defined]
    if ctx is None or ctx.parent is None:  # at the top: the command itself was wrong
        return cannot_start(None, f"{message} (commands: {', '.join(commands)})")
    command = ctx.command_path.removeprefix("pride").strip()
    return cannot_start(command, f"{message} (pride {command} --help shows the usage)")
