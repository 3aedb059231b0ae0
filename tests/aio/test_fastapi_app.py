"""Issue 30: examples/fastapi_app.py served by uvicorn as a real subprocess, asked, streamed
and shut down by SIGTERM.

The port is free by construction: the test binds a listening socket on port 0 and
hands it to uvicorn (``--fd``), so a request made before the app is up waits in the
socket's backlog instead of racing the server's start. The only clock is a hang guard.
Run as a script, the example serves itself once: tests/test_examples.py runs it so.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path
from uuid import UUID

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

EXAMPLES = Path(__file__).parents[2] / "examples"

# A hang guard, not a speed claim: the whole exchange takes about 2 s on a quiet machine.
HANG = 300

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="uvicorn --fd and POSIX signals"),
    pytest.mark.timeout(HANG + 60),  # past the guard below, which says what the server printed
]

QUESTION = "Which book on trio should I read?"
ANSWER = "On 'Which book on trio should I read': " + (
    "the catalogue has three books, and the second is the best."
)


async def _ask_and_stream(client: httpx.AsyncClient) -> tuple[str, list[str], list[str]]:
    answer = (await client.post("/ask", json={"question": QUESTION})).raise_for_status().json()
    chunks: list[str] = []
    done: list[str] = []
    async with aconnect_sse(client, "POST", "/stream", json={"question": QUESTION}) as events:
        assert events.response.headers["content-type"].startswith("text/event-stream")
        async for event in events.aiter_sse():
            (chunks if event.event == "chunk" else done).append(json.loads(event.data))
    return answer["answer"], chunks, done


async def test_the_fastapi_example_asks_streams_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    """Concurrent asks and SSE streams are answered by the team in the app's lifespan; on
    SIGTERM uvicorn drains, the lifespan closes the team (its member stopped), and the
    process ends as uvicorn ends every graceful shutdown: by re-raising the signal it
    caught (exit status -SIGTERM), with no traceback."""
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        out_path.open("w") as out,
        err_path.open("w") as err,
    ):
        port = listener.getsockname()[1]
        command = [sys.executable, "-m", "uvicorn", "--app-dir", str(EXAMPLES)]
        command += ["--fd", str(listener.fileno()), "fastapi_app:app"]
        process = await trio.lowlevel.open_process(
            command, pass_fds=(listener.fileno(),), stdout=out, stderr=err
        )
        try:
            with trio.fail_after(HANG):
                results: list[tuple[str, list[str], list[str]]] = []

                async def one(client: httpx.AsyncClient) -> None:
                    results.append(await _ask_and_stream(client))

                base_url = f"http://127.0.0.1:{port}"
                async with httpx.AsyncClient(base_url=base_url, timeout=HANG) as client:
                    async with trio.open_nursery() as nursery:
                        for _ in range(5):
                            nursery.start_soon(one, client)
                process.send_signal(signal.SIGTERM)
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    stdout, stderr = out_path.read_text(), err_path.read_text()
    assert len(results) == 5, stderr
    for answer, chunks, done in results:
        assert answer == ANSWER
        assert len(chunks) > 1 and "".join(chunks) == ANSWER  # streamed in pieces, in order
        assert len(done) == 1 and UUID(done[0])  # the done event names the turn
    assert code == -signal.SIGTERM, (code, stdout, stderr)
    assert "Traceback" not in stderr, stderr
    assert "Application shutdown complete." in stderr
    assert "pride team closed; the librarian still running: False" in stdout
