"""A hand-written stdio "MCP server" that misbehaves on purpose (no SDK: it starts fast).

``python fake_server.py MODE``; each mode breaks one rule a client must survive:

* ``exit``: writes to stderr and exits with code 2 before saying anything;
* ``silent``: never answers;
* ``huge``: initialises, then answers a call with one endless line;
* ``garbage``: prints non-JSON lines before and between valid answers;
* ``stubborn``: a working server that ignores SIGTERM and the end of its input;
* ``names``: offers tools with odd names and bad schemas;
* ``crashy STARTED RELEASE``: a working server whose ``crash`` tool exits with
  code 3; it creates the file STARTED when it first starts, and a later start
  (a restart) waits for the file RELEASE before it answers anything.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

MODE = sys.argv[1]

TOOLS = [{"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object"}}]
if MODE == "crashy":
    TOOLS = [*TOOLS, {"name": "crash", "inputSchema": {"type": "object"}}]
if MODE == "names":
    TOOLS = [
        {"name": "files.read", "description": "Dotted name.", "inputSchema": {"type": "object"}},
        {"name": "not-an-object", "inputSchema": {"type": "string"}},
        {"name": "broken-schema", "inputSchema": {"type": "object", "properties": 3}},
        {"name": "long", "description": "x" * 20_000, "inputSchema": {"type": "object"}},
        {"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object"}},
    ]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> None:
    method = request.get("method")
    if "id" not in request:
        return
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": f"fake-{MODE}", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and MODE == "huge":
        while True:  # one endless line, never a newline
            sys.stdout.write("x" * 65536)
            sys.stdout.flush()
    elif method == "tools/call" and request["params"]["name"] == "crash":
        sys.exit(3)
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}], "isError": False}
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": method}})
        return
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def main() -> None:
    if MODE == "exit":
        sys.stderr.write("fake: missing configuration FAKE_TOKEN\n")
        sys.exit(2)
    if MODE == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if MODE == "crashy":
        started, release = sys.argv[2], sys.argv[3]
        if os.path.exists(started):  # a restart: held until the test lets it go
            while not os.path.exists(release):
                time.sleep(0.01)
        else:
            open(started, "w").close()
    for line in sys.stdin:
        if MODE == "silent":
            continue
        if MODE == "garbage":
            sys.stdout.write("Starting fake server... not JSON\n{broken json\n")
            sys.stdout.flush()
        answer(json.loads(line))
    if MODE == "stubborn":
        while True:  # ignores the end of its input too: only SIGKILL ends it
            time.sleep(1)


main()
