"""A hand-written stdio "MCP server" that misbehaves on purpose (no SDK: it starts fast).

``python fake_server.py MODE [ARGS]``; each mode breaks one rule a client must survive:

* ``exit``: writes to stderr and exits with code 2 before saying anything;
* ``silent``: never answers;
* ``huge``: initialises, then answers a call with one endless line;
* ``garbage``: prints non-JSON lines before and between valid answers;
* ``stubborn``: a working server that ignores SIGTERM and the end of its input;
* ``names``: offers tools with odd names and bad schemas;
* ``crashy STARTED RELEASE``: a working server whose ``crash`` tool exits with
  code 3; it creates the file STARTED when it first starts, and a later start
  (a restart) waits for the file RELEASE before it answers anything.
* ``liar``: answers the call of ``err`` with a JSON-RPC error of code -32000,
  the code the SDK uses for a closed connection; a call of ``hold`` is
  answered only after the next ``err``;
* ``deaf``: lists its tools, then never reads its input again (and never exits);
* ``many N``: offers N tools (each schema its own); a call of ``relist`` adds one more and sends
  ``notifications/tools/list_changed``;
* ``schemas``: offers tools whose schemas are traps for a validator (a ReDoS
  ``pattern``, ``uniqueItems``, ``$ref`` loops, an output schema with a ReDoS
  ``pattern``), one nested deeper than the SDK's JSON parser allows, and ``ping``;
* ``empty-name``: offers a tool named ``""`` beside ``ping``; a call of
  ``relist`` sends ``notifications/tools/list_changed``;
* ``chatty N``: a call of ``flood`` sends N log notifications (level
  ``critical``) before its answer, a call of ``progress`` N progress
  notifications of 200 KB each (``chatty N SIZE``: of SIZE bytes);
* ``daemons``: a call of ``spawn`` starts two children that leave the server's
  process group, one with ``setsid()``, one with ``setpgid(0, 0)``, and answers
  their pids;
* ``restless``: sends ``notifications/tools/list_changed`` after every tool list
  it answers; a call of ``lists`` answers how many lists were asked for;
* ``collide``: offers ``a.b`` and ``a_b`` (both ``a_b`` to pride); a call of
  ``swap`` lists them the other way round and sends ``list_changed``;
* ``half``: answers a call of ``half`` with half a line, then exits (it died
  mid-write);
* ``rude``: answers a call of ``bad-shape`` with a result of the wrong shape, a
  call of ``long-error`` with a JSON-RPC error of 1 MB, and a call of ``stray``
  with answers to requests never made (one with an id of 100,000 characters)
  and notifications that are not MCP's (100,000 characters each) before the
  right answer, and a call of ``requests`` with 1,000 requests that are not MCP's
  before its answer (a call of ``refusals`` answers how many error answers to its
  requests it has read);
* ``mute``: never answers a call of ``never``; a call of ``cancellations``
  answers the request ids of the ``notifications/cancelled`` it has read (JSON);
* ``bulky``: a call of ``big`` (``{"bytes": N}``) answers one text block of N
  bytes, a call of ``blocks`` (``{"count": N}``) N text blocks of one letter,
  and a call of ``images`` (``{"count": N}``) N tiny image blocks;
* ``prompt``: answers a call of ``report`` with a progress notification, then
  ``fillers`` progress notifications for another request, then its answer, all
  in one write, so the answer arrives as the caller acts on the report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

MODE = sys.argv[1]

OBJECT = {"type": "object"}
TOOLS = [{"name": "ping", "description": "Answer pong.", "inputSchema": OBJECT}]
if MODE == "crashy":
    TOOLS = [*TOOLS, {"name": "crash", "inputSchema": OBJECT}]
if MODE == "names":
    TOOLS = [
        {"name": "files.read", "description": "Dotted name.", "inputSchema": OBJECT},
        {"name": "not-an-object", "inputSchema": {"type": "string"}},
        {"name": "broken-schema", "inputSchema": {"type": "object", "properties": 3}},
        {"name": "long", "description": "x" * 20_000, "inputSchema": OBJECT},
        {"name": "ping", "description": "Answer pong.", "inputSchema": OBJECT},
    ]
if MODE == "liar":
    TOOLS = [
        *TOOLS,
        {"name": "err", "inputSchema": OBJECT},
        {"name": "hold", "inputSchema": OBJECT},
    ]
if MODE == "deaf":
    TOOLS = [{"name": "echo", "inputSchema": OBJECT}]
if MODE == "mute":
    TOOLS = [
        *TOOLS,
        {"name": "never", "inputSchema": OBJECT},
        {"name": "cancellations", "inputSchema": OBJECT},
    ]
if MODE == "bulky":
    TOOLS = [
        *TOOLS,
        {"name": "big", "inputSchema": OBJECT},
        {"name": "blocks", "inputSchema": OBJECT},
        {"name": "images", "inputSchema": OBJECT},
    ]


def _many(count: int) -> list[dict]:
    tools = [
        {
            "name": f"tool_{n}",
            "description": f"Tool number {n}.",
            "inputSchema": {"type": "object", "properties": {f"text_{n}": {"type": "string"}}},
        }
        for n in range(count)
    ]
    return [*tools, {"name": "relist", "inputSchema": OBJECT}]


if MODE == "many":
    TOOLS = _many(int(sys.argv[2]))


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


if MODE == "schemas":
    TOOLS = [
        {
            "name": "redos",
            "inputSchema": {
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}},
            },
        },
        {
            "name": "redos_keys",
            "inputSchema": {"type": "object", "patternProperties": {"^(a|aa)+$": OBJECT}},
        },
        {
            "name": "unique",
            "inputSchema": {
                "type": "object",
                "properties": {"items": {"type": "array", "uniqueItems": True}},
            },
        },
        {"name": "loop", "inputSchema": {"type": "object", "$ref": "#"}},
        {
            "name": "loop_inside",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/x"}},
                "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": "#/$defs/x"}},
            },
        },
        {
            "name": "fanout",  # 2**18 paths through anyOf, each a $ref to the next level
            "inputSchema": {
                "type": "object",
                "$ref": "#/$defs/d0",
                "$defs": {
                    **{f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"}] * 2} for n in range(18)},
                    "d18": {"required": ["never"]},
                },
            },
        },
        {
            "name": "redos_out",
            "inputSchema": OBJECT,
            "outputSchema": {
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}},
            },
        },
        {"name": "deep", "inputSchema": _nested(150)},  # past the SDK parser's 200 levels
        *TOOLS,
    ]
if MODE == "empty-name":
    TOOLS = [
        {"name": "", "inputSchema": OBJECT},
        *TOOLS,
        {"name": "relist", "inputSchema": OBJECT},
    ]
if MODE == "daemons":
    TOOLS = [*TOOLS, {"name": "spawn", "inputSchema": OBJECT}]
if MODE == "restless":
    TOOLS = [*TOOLS, {"name": "lists", "inputSchema": OBJECT}]
if MODE == "collide":
    TOOLS = [
        {"name": "a.b", "description": "The dotted one.", "inputSchema": OBJECT},
        {"name": "a_b", "description": "The underscored one.", "inputSchema": OBJECT},
        {"name": "swap", "inputSchema": OBJECT},
    ]
if MODE == "half":
    TOOLS = [*TOOLS, {"name": "half", "inputSchema": OBJECT}]
if MODE == "prompt":
    TOOLS = [*TOOLS, {"name": "report", "inputSchema": OBJECT}]
if MODE == "rude":
    TOOLS = [
        *TOOLS,
        {"name": "bad-shape", "inputSchema": OBJECT},
        {"name": "long-error", "inputSchema": OBJECT},
        {"name": "stray", "inputSchema": OBJECT},
        {"name": "requests", "inputSchema": OBJECT},
        {"name": "refusals", "inputSchema": OBJECT},
    ]

CHANGING = ("many", "empty-name", "restless", "collide")
held: list[int] = []
refused: list[object] = []
cancelled: list[object] = []
listed = [0]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call(request: dict) -> dict | None:
    """The result of a tools/call (None: answered, or to be answered, elsewhere)."""
    name = request["params"]["name"]
    if MODE == "huge":
        while True:  # one endless line, never a newline
            sys.stdout.write("x" * 65536)
            sys.stdout.flush()
    if name == "crash":
        sys.exit(3)
    if name == "hold":
        held.append(request["id"])
        return None
    if name == "never":
        return None
    if name == "cancellations":
        return text(json.dumps(cancelled))
    arguments = request["params"].get("arguments") or {}
    if name == "big":
        return text("x" * arguments["bytes"])
    if name == "blocks":
        return {"content": [{"type": "text", "text": "b"}] * arguments["count"]}
    if name == "images":
        image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        return {"content": [image] * arguments["count"]}
    if name == "err":
        error = {"code": -32000, "message": "Connection closed"}
        send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        for waiting in held:
            send({"jsonrpc": "2.0", "id": waiting, "result": text("held")})
        held.clear()
        return None
    if name == "relist":
        if MODE == "many":
            TOOLS.append({"name": f"tool_{len(TOOLS)}", "inputSchema": OBJECT})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("relisted")
    if name == "flood":
        for n in range(int(sys.argv[2])):
            params = {"level": "critical", "logger": "fake", "data": f"flood {n} " + "!" * 1000}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return text("flooded")
    if name == "progress":
        token = request["params"]["_meta"]["progressToken"]
        for n in range(int(sys.argv[2])):
            size = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
            params = {"progressToken": token, "progress": n, "message": "p" * size}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        return text("progressed")
    if name == "redos_out":
        return {**text("out"), "structuredContent": {"s": "a" * 36 + "!"}}
    if name == "half":
        half = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": text("pong")})
        sys.stdout.write(half[: len(half) // 2])
        sys.stdout.flush()
        os._exit(0)
    if name == "swap":
        TOOLS[0], TOOLS[1] = TOOLS[1], TOOLS[0]
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("swapped")
    if name == "lists":
        return text(str(listed[0]))
    if name == "spawn":
        pids = []
        for leave in ("os.setsid()", "os.setpgid(0, 0)"):
            code = f"import os, time; {leave}; time.sleep(60)"
            child = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            pids.append(str(child.pid))
        while any(os.getpgid(int(pid)) == os.getpgid(0) for pid in pids):
            time.sleep(0.01)  # answer once both have left the group
        return text(" ".join(pids))
    if name == "report":
        token = request["params"]["_meta"]["progressToken"]
        fillers = request["params"]["arguments"].get("fillers", 0)
        tokens = [token] + ["another"] * fillers
        lines = [
            *(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": 1},
                }
                for t in tokens
            ),
            {"jsonrpc": "2.0", "id": request["id"], "result": text("reported")},
        ]
        sys.stdout.write("".join(json.dumps(line) + "\n" for line in lines))  # one write
        sys.stdout.flush()
        return None
    if name == "bad-shape":
        return {"content": "not a list of parts"}
    if name == "stray":
        for stray in ["7" * 100_000, "x" * 100_000, request["id"] + 1_000]:
            send({"jsonrpc": "2.0", "id": stray, "result": text("stray")})
        for method, params in [
            ("notifications/bogus", {"x": "y" * 100_000}),
            ("notifications/progress", {"progressToken": 1, "progress": "z" * 100_000}),
        ]:
            send({"jsonrpc": "2.0", "method": method, "params": params})
        return text("pong")
    if name == "requests":
        for n in range(1_000):
            send({"jsonrpc": "2.0", "id": f"r{n}", "method": "bogus/method", "params": {}})
        return text("pong")
    if name == "refusals":
        return text(str(len(refused)))
    if name == "long-error":
        error = {"code": -32603, "message": "E" * 1_000_000}
        send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        return None
    return text("pong")


def answer(request: dict) -> None:
    method = request.get("method")
    if "error" in request:  # the client's error answer to a request of ours
        refused.append(request["id"])
    if method == "notifications/cancelled":
        cancelled.append(request["params"]["requestId"])
    if "id" not in request or method is None:
        return
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {
                "tools": {"listChanged": MODE in ("many", "empty-name", "restless", "collide")}
            },
            "serverInfo": {"name": f"fake-{MODE}", "version": "0"},
        }
    elif method == "tools/list":
        listed[0] += 1
        send({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": TOOLS}})
        if MODE == "restless":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return
    elif method == "tools/call":
        result = call(request)
        if result is None:
            return
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
        request = json.loads(line)
        answer(request)
        if MODE == "deaf" and request.get("method") == "tools/list":
            while True:  # never reads its input again; the client's writes fill the pipe
                time.sleep(1)
    if MODE == "stubborn":
        while True:  # ignores the end of its input too: only SIGKILL ends it
            time.sleep(1)


main()
