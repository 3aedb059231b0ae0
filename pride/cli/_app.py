"""The ``pride`` command line: chat, run, serve, mcp and inspect (typer parses, rich prints)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import trio
import typer
from rich.console import Console

from .._version import __version__
from ..messages.limits import image_url_prefixes
from ._answers import MAX_PENDING
from ._chat import CHAT_TIMEOUT, ChatOptions, run_chat
from ._http_options import AllowHost, AllowOrigin
from ._inspect import inspect_store
from ._lines import MAX_LINE
from ._mcp import serve_app
from ._run import RunOptions, run_app
from ._serve import ServeCommand, serve_command
from ._startup import CannotStart, cannot_start
from ._usage import ClickException, PlainUsage, UsageError, usage_error

__all__ = ["ALLOW_IMAGE_URL_HELP", "PIPE_WIDTH", "app", "main"]

PIPE_WIDTH = 160
"""Columns rich lays tables out in when standard output is not a terminal."""


app = typer.Typer(
    name="pride",
    help="pride: an actor runtime for LLM-agent conversations, on trio.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # errors are reported by each command
    # click's own help layout: a flag reads `--status / --no-status` and an
    # option its metavar (`--store FILE`), where typer's rich panels print
    # `<bool>` beside every flag and squeeze the help text into a narrow column.
    rich_markup_mode=None,
)


def _image_prefixes(values: list[str] | None) -> list[str] | None:
    """``--allow-image-url`` values, each checked (a bad one is a usage error, status 2)."""
    try:
        image_url_prefixes(*(values or ()))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return values


ALLOW_IMAGE_URL_HELP = (
    "Let requests carry image URLs under PREFIX, an http(s) URL with a host and a path "
    "such as https://cdn.example.com/ (repeat it); by default only data: URLs, since the "
    "provider fetches any other URL on the sender's behalf."
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pride {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """pride: an actor runtime for LLM-agent conversations, on trio."""


@app.command(cls=PlainUsage)
def chat(
    *,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="PROVIDER/MODEL",
            help="e.g. openai/gpt-4.1-mini (default: $PRIDE_CHAT_MODEL).",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="API root of an OpenAI-compatible server (vLLM, a proxy, a test server).",
        ),
    ] = None,
    system: Annotated[
        str | None, typer.Option(metavar="TEXT", help="System prompt of a new conversation.")
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="SQLite branch store: turns are saved as they end."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The conversation's name (its key in the store) [default: chat].",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            metavar="MODULE:FUNCTION",
            help="Talk to your own branch: FUNCTION() returns it, with its model, tools and "
            "system prompt. Tool calls are shown; one needing approval is asked about (y/n).",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="How long the model may stay silent (connecting, before its first token, "
            "between reads) before the attempt fails; retries are shown as they happen.",
        ),
    ] = CHAT_TIMEOUT,
) -> None:
    """Talk to one branch; replies stream. /help lists the commands."""
    options = ChatOptions(
        model=model,
        base_url=base_url,
        system=system,
        store=store,
        name=name,
        timeout=timeout,
        agent=agent,
    )
    raise typer.Exit(run_chat(options))


@app.command(cls=PlainUsage, short_help="Serve a supervisor tree; JSON-line requests on stdin.")
def run(
    app: Annotated[
        str,
        typer.Argument(
            metavar="APP",
            help="module:function or path/to/file.py:function; it receives the root Session.",
            show_default=False,
        ),
    ],
    *,
    store: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="SQLite branch store for the tree's named branches."),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            min=0, metavar="SECONDS", help="Seconds running turns get to finish on shutdown."
        ),
    ] = 5.0,
    status: Annotated[
        bool, typer.Option(help="Show a live status line (only when stderr is a terminal).")
    ] = True,
    exit_on_eof: Annotated[
        bool,
        typer.Option(
            show_default=False,
            help="Stop (gracefully) once stdin ends and every request is answered. "
            "Without it, end of input keeps the process serving until SIGINT or SIGTERM "
            "(a service's stdin is often /dev/null): give it when piping requests in.",
        ),
    ] = False,
    log_level: Annotated[
        str, typer.Option(metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR.")
    ] = "INFO",
    max_line_bytes: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="BYTES",
            help="The longest request line; a longer one is answered with an error and skipped.",
        ),
    ] = MAX_LINE,
    max_pending: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Requests read and not yet answered on stdout; past it stdin is read once an "
            "answer is written (a client that does not read its answers holds bounded memory).",
        ),
    ] = MAX_PENDING,
    allow_image_url: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-image-url",
            metavar="PREFIX",
            show_default=False,
            callback=_image_prefixes,
            help=ALLOW_IMAGE_URL_HELP,
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            metavar="[ADDRESS]",
            show_default=False,
            help="Place the branches on a Ray cluster (the ray extra): a running one's "
            "ADDRESS ('auto', 'HOST:6379'), or a local one started here when no ADDRESS "
            "is given. The app function then takes (session, cluster).",
        ),
    ] = None,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            show_default=False,
            help="Export OpenTelemetry traces of every turn over OTLP (configured by the "
            "OTEL_EXPORTER_OTLP_* variables; needs pride[otel] and an OTLP exporter).",
        ),
    ] = False,
) -> None:
    """Run a supervisor tree as a long-running process; JSON-line requests on stdin."""
    options = RunOptions(
        app=app,
        store=store,
        grace=grace,
        status=status,
        exit_on_eof=exit_on_eof,
        log_level=log_level,
        max_line_bytes=max_line_bytes,
        max_pending=max_pending,
        image_urls=tuple(allow_image_url or ()),
        cluster=cluster,
        otel=otel,
    )
    raise typer.Exit(run_app(options))


@app.command(cls=PlainUsage, short_help="Serve an app's branches to MCP clients as tools.")
def mcp(
    app: Annotated[
        str,
        typer.Argument(
            metavar="APP",
            help="module:function or path/to/file.py:function; it receives the root Session.",
            show_default=False,
        ),
    ],
    *,
    expose: Annotated[
        list[str],
        typer.Option(
            "--expose",
            metavar="NAME",
            show_default=False,
            help="A branch to serve as MCP tools (repeat it); none is served unless named.",
        ),
    ],
    http: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            min=0,
            max=65535,
            help=(
                "Serve streamable HTTP on 127.0.0.1:PORT/mcp (default: stdio); 0 picks a "
                "free port. The bound URL is printed on stdout: 'pride mcp: serving on URL'."
            ),
        ),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            min=0, metavar="SECONDS", help="Seconds running turns get to finish on shutdown."
        ),
    ] = 5.0,
    log_level: Annotated[
        str, typer.Option(metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR.")
    ] = "INFO",
    allow_image_url: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-image-url",
            metavar="PREFIX",
            show_default=False,
            callback=_image_prefixes,
            help=ALLOW_IMAGE_URL_HELP.replace("requests", "a client's operation arguments"),
        ),
    ] = None,
    allow_host: AllowHost = None,
    allow_origin: AllowOrigin = None,
    max_concurrent: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Tool calls served at once, from every client; more wait briefly, then "
            "are refused with an error result naming this bound.",
        ),
    ] = 128,
    max_watchers: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="With --http: GET streams open at once, apart from the calls' places; "
            "more wait briefly, then get 503 with Retry-After.",
        ),
    ] = 64,
    max_sessions: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="With --http: MCP sessions open at once (an idle one ends after 30 "
            "minutes); a client opening one more gets 503.",
        ),
    ] = 256,
) -> None:
    """Serve an app's branches as MCP tools over stdio (or streamable HTTP with --http)."""
    raise typer.Exit(
        serve_app(
            app,
            expose,
            http=http,
            grace=grace,
            log_level=log_level,
            image_urls=tuple(allow_image_url or ()),
            allow_hosts=tuple(allow_host or ()),
            allow_origins=tuple(allow_origin or ()),
            bounds={
                "max_concurrent": max_concurrent,
                "max_watchers": max_watchers,
                "max_sessions": max_sessions,
            },
        )
    )


@app.command(
    cls=PlainUsage, short_help="Serve a supervisor tree over HTTP (native API and OpenAI's)."
)
def serve(
    app: Annotated[
        str,
        typer.Argument(
            metavar="APP",
            help="module:function or path/to/file.py:function; it receives the root Session.",
            show_default=False,
        ),
    ],
    *,
    store: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="SQLite branch store for the tree's named branches."),
    ] = None,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="The address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(metavar="PORT", min=0, max=65535, help="The port (0: a free one)."),
    ] = 8000,
    token_file: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Bearer tokens, one per line, each optionally followed by the branch "
            "names or globs it may reach (default: $PRIDE_SERVE_TOKEN, else one is made "
            "and printed on stderr).",
        ),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            min=0, metavar="SECONDS", help="Seconds running turns get to finish on shutdown."
        ),
    ] = 5.0,
    max_body_bytes: Annotated[
        int,
        typer.Option(min=1, metavar="BYTES", help="The largest request body (413 past it)."),
    ] = 16 * 1024 * 1024,
    max_concurrent: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Requests running turns at once; more wait briefly, then get 503 with "
            "Retry-After.",
        ),
    ] = 128,
    max_watchers: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Event streams (GET /v1/events) open at once, apart from --max-concurrent's "
            "places; more wait briefly, then get 503 with Retry-After.",
        ),
    ] = 64,
    header_timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="How long a connection may take to send a request head.",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            min=0.001, metavar="SECONDS", help="How long a request body may take to arrive."
        ),
    ] = 30.0,
    send_timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="How long an answer's writes may wait for the client to read some of "
            "them; past it the client is taken for gone (its turn cancelled).",
        ),
    ] = 30.0,
    keepalive: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="Seconds between keep-alive comments of an idle event stream.",
        ),
    ] = 15.0,
    allow_host: AllowHost = None,
    allow_origin: AllowOrigin = None,
    console: Annotated[
        bool,
        typer.Option(
            "--console",
            show_default=False,
            help="Serve the live console (a web page of the tree, its turns and approvals) at /.",
        ),
    ] = False,
    allow_image_url: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-image-url",
            metavar="PREFIX",
            show_default=False,
            callback=_image_prefixes,
            help=ALLOW_IMAGE_URL_HELP,
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            metavar="[ADDRESS]",
            show_default=False,
            help="Place the branches on a Ray cluster, as for pride run.",
        ),
    ] = None,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel", show_default=False, help="Export OpenTelemetry traces, as for pride run."
        ),
    ] = False,
    log_level: Annotated[
        str, typer.Option(metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR.")
    ] = "INFO",
) -> None:
    """Serve a supervisor tree over HTTP: the native API, OpenAI's chat completions."""
    from ..serve import ServeOptions

    options = ServeOptions(
        host=host,
        port=port,
        max_body_bytes=max_body_bytes,
        max_concurrent=max_concurrent,
        max_watchers=max_watchers,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
        keepalive=keepalive,
        image_urls=tuple(allow_image_url or ()),
        allow_hosts=tuple(allow_host or ()),
        allow_origins=tuple(allow_origin or ()),
        console=console,
    )
    command = ServeCommand(
        app=app,
        serve=options,
        store=store,
        grace=grace,
        token_file=token_file,
        log_level=log_level,
        otel=otel,
        cluster=cluster,
    )
    raise typer.Exit(serve_command(command))


@app.command(cls=PlainUsage)
def inspect(
    store: Annotated[Path, typer.Argument(metavar="STORE", help="The SQLite branch store.")],
    branch: Annotated[
        str | None,
        typer.Argument(metavar="BRANCH", help="A branch name: print its conversation."),
    ] = None,
) -> None:
    """List the branches of a store, or print one conversation."""
    # Piped output has no terminal width to fit: give tables room rather than 80 columns.
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    out = Console(highlight=False, emoji=False, width=width)
    raise typer.Exit(trio.run(inspect_store, store, branch, out))


LOCAL_CLUSTER = "local"
"""What ``pride run --cluster`` without an address means: start a local Ray cluster."""


def main() -> None:
    """The console-script entry point (``pride``); exits with the command's status.

    A usage error found by click and a `CannotStart` raised by a command are
    one line on stderr and exit status 2; ``pride``
    alone prints the help.
    """
    argv = _optional_cluster_address(sys.argv[1:]) or ["--help"]
    try:
        code = app(args=argv, prog_name="pride", standalone_mode=False)
    except CannotStart as exc:
        code = cannot_start(exc.command, exc.message)
    except UsageError as exc:
        code = usage_error(exc, _command_names())
    except ClickException as exc:  # click's other errors (a file it could not open)
        code = cannot_start(None, exc.format_message())  # type: ignore[attr-defined]
    except typer.Abort:
        code = cannot_start(None, "aborted")
    sys.exit(code if isinstance(code, int) else 0)


def _optional_cluster_address(argv: list[str]) -> list[str]:
    """``--cluster`` may stand alone (a local cluster); typer's options always take
    a value, so a bare one is given `LOCAL_CLUSTER`."""
    out = []
    for index, arg in enumerate(argv):
        out.append(arg)
        if arg == "--cluster":
            following = argv[index + 1] if index + 1 < len(argv) else None
            if following is None or following.startswith("-"):
                out.append(LOCAL_CLUSTER)
    return out


def _command_names() -> list[str]:
    """The commands, as ``pride --help`` lists them."""
    return [
        info.name or getattr(info.callback, "__name__", "").replace("_", "-")
        for info in app.registered_commands
    ]
