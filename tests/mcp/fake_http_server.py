"""A hand-written streamable-HTTP "MCP server" that misbehaves on purpose (stdlib only).

``python fake_http_server.py MODE``; it listens on 127.0.0.1 (a port the system
chooses) and prints ``fake-http: serving on URL`` once it does. Modes:

* ``endless-line``: answers a call with an SSE body whose ``data:`` line never
  ends (64 KiB writes, up to 256 MiB, until the client hangs up);
* ``endless-event``: the same with many short ``data:`` lines and no blank line,
  so the event never ends;
* ``cut-event``: answers a call with an SSE body that ends half-way through its
  event (the server "died mid-write");
* ``not-an-answer``: answers a call with a JSON body that is not JSON-RPC;
* ``accepted``: answers a call with ``202 Accepted`` (as for a notification);
* ``endless-get``: its GET stream (messages outside any request) is one
  endless line;
* ``never-answers``: a call of ``hang`` opens an SSE stream and never answers
  (it writes a comment now and then, to see the client hang up); a call of
  ``hanging`` answers how many such streams are open.

Initialisation, notifications and ``tools/list`` are answered properly.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time

MODE = sys.argv[1]
CHUNK = 65_536
hanging = [0]
lock = threading.Lock()
MAX_BYTES = 256 * 1024 * 1024


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass  # quiet

    def _json(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("mcp-session-id", "fake-session")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if MODE == "endless-get":
            self._endless()
            return
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = request.get("method")
        if "id" not in request:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"fake-http-{MODE}", "version": "0"},
            }
            self._json({"jsonrpc": "2.0", "id": request["id"], "result": result})
        elif method == "tools/list":
            tools = [{"name": "endless", "inputSchema": {"type": "object"}}]
            self._json({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": tools}})
        elif MODE == "cut-event":
            body = b'data: {"jsonrpc": "2.0", "id": ' + str(request["id"]).encode()
            self._close_after(b"text/event-stream", body)
        elif MODE == "never-answers" and request["params"]["name"] == "hanging":
            result = {"content": [{"type": "text", "text": str(hanging[0])}], "isError": False}
            self._json({"jsonrpc": "2.0", "id": request["id"], "result": result})
        elif MODE == "never-answers":
            self._hang()
        elif MODE == "accepted":
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif MODE == "not-an-answer":
            self._close_after(b"application/json", b'{"hello": "world"}')
        else:
            self._endless()

    def _hang(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with lock:
            hanging[0] += 1
        try:
            while True:
                self.wfile.write(b": still thinking\n")
                self.wfile.flush()
                time.sleep(0.02)
        except OSError:
            pass  # the client hung up
        finally:
            with lock:
                hanging[0] -= 1

    def _close_after(self, kind: bytes, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind.decode())
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(body)

    def _endless(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        piece = b"data: x\n" * (CHUNK // 8) if MODE == "endless-event" else b"x" * CHUNK
        sent = 0
        try:
            self.wfile.write(b"data: ")
            while sent < MAX_BYTES:
                self.wfile.write(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up, as it should


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"fake-http: serving on http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    server.serve_forever()


main()
