"""``pride run``: a long-running process serving JSON-line requests, durable across restarts.

Every test starts the real CLI as a subprocess against a temporary store and
a loopback model server running in the test's trio loop (real clock: the
server does socket I/O).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from pride import StoreLocked
from pride.messages import codec
from pride.store import BranchStore
from pride.testing import openai_server
from tests.cli.collector import otlp_collector
from tests.cli.driver import (
    CLI,
    COMMAND,
    ROOT,
    TIMEOUT,
    HeldModel,
    cli_env,
    contents,
    last_text,
    request,
)

APP = "tests.cli.app:build"


async def _stored(path: Path, name: str) -> list[str]:
    async with BranchStore(path) as store:
        return [message.text for message in await store.load_messages(name)]


async def test_sigterm_mid_turn_finishes_it_and_a_second_run_continues(tmp_path: Path) -> None:
    """SIGTERM lets the running turn finish, refuses the queued one, exits 0; nothing is lost."""
    store = tmp_path / "agents.db"
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--store", str(store), "--no-status", "--log-level", "DEBUG")
        async with CLI.start(*args, "--grace", "30", env=env) as cli:
            await cli.send(request("r1", "ada", "hello"))
            assert await cli.answer("r1") == {"id": "r1", "ok": True, "result": "re: hello"}
            await cli.send(request("r2", "ada", "slow question"))
            await cli.send(request("r3", "ada", "queued behind it"))
            await cli.wait_event(model.held, "the model request of r2")
            await cli.logged("request r3 queued for 'ada'")
            cli.process.send_signal(signal.SIGTERM)
            await cli.logged("SIGTERM: stopping")
            model.release.set()
            assert await cli.exit_code() == 0
        answers = cli.answers()
        assert answers["r2"] == {"id": "r2", "ok": True, "result": "re: slow question"}
        assert answers["r3"]["ok"] is False, cli.transcript()
        assert answers["r3"]["error"]["type"] == "BranchClosed"
        assert await _stored(store, "ada") == [
            "You are Ada.",
            "hello",
            "re: hello",
            "slow question",
            "re: slow question",
        ]

        async with CLI.start(*args, "--exit-on-eof", env=env) as cli:
            await cli.send(request("r4", "ada", "and now?"))
            assert (await cli.answer("r4"))["result"] == "re: and now?"
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    assert contents(server.requests[-1].body) == [
        "You are Ada.",
        "hello",
        "re: hello",
        "slow question",
        "re: slow question",
        "and now?",
    ]
    assert len(await _stored(store, "ada")) == 7


async def test_kill_9_loses_only_the_turn_in_flight(tmp_path: Path) -> None:
    """After kill -9 mid-turn, every message of the finished turns is in the store."""
    store = tmp_path / "agents.db"
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--store", str(store), "--no-status", env=env) as cli:
            await cli.send(request("r1", "ada", "one"))
            await cli.send(request("r2", "bob", "two"))
            await cli.answer("r1")
            await cli.answer("r2")
            await cli.send(request("r3", "ada", "slow three"))
            await cli.wait_event(model.held, "the model request of r3")
            cli.process.kill()
            assert await cli.exit_code() == -signal.SIGKILL
        assert "r3" not in cli.answers()
    assert await _stored(store, "ada") == ["You are Ada.", "one", "re: one"]
    assert await _stored(store, "bob") == ["You are Bob.", "two", "re: two"]


async def test_a_second_signal_forces_the_shutdown(tmp_path: Path) -> None:
    """A second SIGINT cancels the running turn at once and exits 130."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--no-status", "--grace", "60", env=env) as cli:
            await cli.send(request("r1", "ada", "slow and stuck"))
            await cli.wait_event(model.held, "the model request")
            cli.process.send_signal(signal.SIGINT)
            await cli.logged("SIGINT: stopping")
            cli.process.send_signal(signal.SIGINT)
            assert await cli.exit_code() == 128 + signal.SIGINT
        answer = cli.answers()["r1"]
        assert answer["ok"] is False
        assert answer["error"]["type"] == "TurnCancelled"
        await cli.logged("SIGINT again: forcing")
        model.release.set()


async def test_bad_lines_get_error_answers_and_serving_goes_on(tmp_path: Path) -> None:
    """Each invalid line is answered with an error naming the problem; valid ones are served."""
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--no-status", "--exit-on-eof", env=env) as cli:
            await cli.send("this is not json")
            await cli.send({"id": "no-to", "command": {"type": "Chat", "instruction": "x"}})
            bad = {"type": "Chat", "instruction": 5}
            await cli.send({"id": "bad", "to": "ada", "command": bad})
            await cli.send({"id": "stop", "to": "ada", "command": {"type": "Stop"}})
            await cli.send(request("nobody", "zed", "hello?"))
            await cli.send({"id": 7, "to": "bob", "command": {"type": "Chat", "instruction": "hi"}})
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = cli.answers()
    assert answers[None]["error"]["type"] == "InvalidMessage"
    assert "not JSON" in answers[None]["error"]["message"]
    assert "request.to" in answers["no-to"]["error"]["message"]
    assert answers["bad"]["error"]["message"] == "Chat.instruction: expected str, got int"
    assert "Stop is for supervisors" in answers["stop"]["error"]["message"]
    assert answers["nobody"]["error"]["type"] == "UnknownBranch"
    assert answers[7] == {"id": 7, "ok": True, "result": "re: hi"}
    record = next(r for r in cli.logs() if r["message"] == "branch ada started")
    assert record["level"] == "INFO" and record["logger"] == "pride.cli" and "time" in record


async def test_bad_lines_past_the_first_ten_are_counted_and_each_is_answered() -> None:
    """A client writes 30 lines that are not requests: each still gets its
    InvalidMessage answer, the first 10 are logged (with their request id), and one
    line at the end of the input counts the other 20. Before, each was a warning: a
    client writing garbage flooded the log, bounded only by the stderr queue's drop
    counter."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="3")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--exit-on-eof")
    async with CLI.start(*args, env=env) as cli:
        for number in range(30):
            await cli.send({"id": number, "to": "wordy", "command": {"type": "Nothing"}})
        await cli.send(
            {"id": "good", "to": "wordy", "command": {"type": "Chat", "instruction": "hi"}}
        )
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()[-3000:]
    answers = cli.answers()
    assert all(answers[n]["error"]["type"] == "InvalidMessage" for n in range(30))
    assert answers["good"]["result"] == "xxx"
    said = [r for r in cli.logs() if "is not a valid request" in r["message"]]
    assert [r["request_id"] for r in said] == [str(n) for n in range(10)]
    [counted] = [r for r in cli.logs() if "more request lines" in r["message"]]
    assert counted["message"].startswith("20 more request lines that are not valid requests")
    assert counted["message"].endswith("(30 in all)") and counted["level"] == "WARNING"


async def test_an_app_that_fails_to_start_exits_2(tmp_path: Path) -> None:
    """A failing app function (given as a file path) is reported in one line, exit 2;
    ``--log-level DEBUG`` adds the app's traceback, as a log record."""
    async with CLI.start("run", "tests/cli/app.py:broken", env=cli_env()) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    [line] = cli.stderr
    assert line.startswith("pride run: the app failed to start: RuntimeError: no configuration")
    args = ("run", "tests/cli/app.py:broken", "--log-level", "DEBUG")
    async with CLI.start(*args, env=cli_env()) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    record = await cli.logged("the app failed to start")
    assert record["level"] == "DEBUG" and "in broken\n    raise RuntimeError" in record["exception"]
    assert cli.stderr[-1] == line


async def test_on_a_terminal_a_status_line_shows_the_tree(tmp_path: Path) -> None:
    """With stderr on a terminal, a live line counts branches, queued work, turns and tokens."""
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url, COLUMNS="200", TERM="xterm")
        controller, terminal = os.openpty()
        try:
            process = await trio.lowlevel.open_process(
                [*COMMAND, "run", APP, "--exit-on-eof"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=terminal,
                cwd=ROOT,
                env=env,
            )
        finally:
            os.close(terminal)
        screen = b""
        async with trio.lowlevel.FdStream(controller) as output:
            assert process.stdin is not None
            await process.stdin.send_all(json.dumps(request("r1", "ada", "hi")).encode() + b"\n")
            with trio.fail_after(TIMEOUT):
                while b"turns 1 done, 0 failed" not in screen:
                    screen += await output.receive_some()
                await process.stdin.aclose()
                try:
                    while data := await output.receive_some():
                        screen += data
                except (OSError, trio.BrokenResourceError):
                    pass  # the terminal's other end closed: the process has exited
                assert await process.wait() == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode(errors="replace"))
    assert "pride run serving" in text
    assert "branches 2/2" in text and "queued 0" in text
    assert "tokens " in text
    assert '"message": "branch ada started"' in text  # log lines print above the status line


async def test_a_store_that_is_not_pride_s_is_refused_at_start(tmp_path: Path) -> None:
    """A corrupt store file makes the process exit 2 at start, leaving the file alone."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database" * 200)
    async with CLI.start("run", APP, "--store", str(path), env=cli_env()) as cli:
        assert await cli.exit_code() == 2
    [line] = cli.stderr
    assert line.startswith("pride run: cannot use the store") and "not a SQLite database" in line
    assert path.read_bytes() == b"not a database" * 200


async def test_when_the_root_session_fails_the_process_answers_everything_and_exits_1() -> None:
    """Past the restart intensity the process stops by itself; each request it read is answered."""
    lines = [json.dumps(request(f"r{number}", "fragile", "hi")) for number in range(6)]
    async with CLI.start("run", "tests.cli.app:crashing", "--no-status", env=cli_env()) as cli:
        await cli.send("\n".join(lines))
        assert await cli.exit_code() == 1
    answers = cli.answers()
    assert {"r0", "r1", "r2", "r3"} <= answers.keys()  # four crashes exceed 3 restarts
    assert {answer["error"]["type"] for answer in answers.values()} <= {"Escalate", "BranchClosed"}
    await cli.logged("the root session failed")


async def test_issue14_request_ids_are_strings_bounded_integers_or_null() -> None:
    """An id a JSON client could not match (NaN, 1e999, 2**53 + 1, 1.5) is refused; every
    answer line is strict JSON."""
    chat = '{"type": "Chat", "instruction": "hi"}'
    bad_ids = ["NaN", "1e999", "-Infinity", str(2**53 + 1), "1.5", "true", "[1]"]
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--no-status", "--exit-on-eof", env=env) as cli:
            for bad in bad_ids:
                await cli.send(f'{{"id": {bad}, "to": "bob", "command": {chat}}}')
            await cli.send(f'{{"id": null, "to": "bob", "command": {chat}}}')
            await cli.send(f'{{"id": {2**53 - 1}, "to": "bob", "command": {chat}}}')
            await cli.send(f'{{"id": "", "to": "bob", "command": {chat}}}')
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = [codec.parse_json(line) for line in cli.stdout]  # strict: no NaN, no huge ints
    refused = [answer for answer in answers if not answer["ok"]]
    assert len(refused) == len(bad_ids), cli.transcript()
    for answer in refused:
        assert answer["id"] is None
        assert answer["error"]["type"] == "InvalidMessage"
        message = answer["error"]["message"]
        assert "request.id" in message or "not a finite number" in message, message
    served = {answer["id"]: answer["result"] for answer in answers if answer["ok"]}
    assert served == {None: "re: hi", 2**53 - 1: "re: hi", "": "re: hi"}


class Listener:
    """A loopback TCP listener that records every connection and byte it receives."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.port = listener.socket.getsockname()[1]
        self.connections = 0
        self.received = b""

    async def serve(self) -> None:
        while True:
            stream = await self.listener.accept()
            self.connections += 1
            async with stream:
                with trio.move_on_after(1):
                    while data := await stream.receive_some():
                        self.received += data


async def test_issue14_a_request_cannot_send_the_key_to_a_host_it_chose() -> None:
    """A model configuration (base_url, provider, key) in a request line is refused, in
    any model field and hidden in Call arguments; nothing reaches the chosen host. A
    request may still pick, by name, a model the application offers."""
    secret = "sk-issue14-never-leaves"
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        trap = Listener(listener)
        nursery.start_soon(trap.serve)
        spec = {"provider": "openai", "model": "x", "base_url": f"http://127.0.0.1:{trap.port}/v1"}
        hostile = {
            "chat": {"type": "Chat", "instruction": "hi", "chat_model": spec},
            "parse": {"type": "Communicate", "instruction": "hi", "parse_model": spec},
            "interpret": {"type": "Interpret", "text": "hi", "interpret_model": spec},
            "react": {"type": "ReAct", "instruction": "hi", "parse_model": spec},
            "call-verb": {
                "type": "Call",
                "operation": "chat",
                "kwargs": {"instruction": "hi", "chat_model": spec},
            },
            "call-hidden": {"type": "Call", "operation": "relay", "kwargs": {"chat_model": spec}},
            "call-nested": {
                "type": "Call",
                "operation": "relay",
                "kwargs": {"request_options": {"cfg": {"base_url": spec["base_url"]}}},
            },
        }
        async with openai_server(HeldModel()) as server:
            env = cli_env(PRIDE_TEST_BASE_URL=server.base_url, OPENAI_API_KEY=secret)
            args = ("run", "tests.cli.app:keyed", "--no-status", "--exit-on-eof")
            async with CLI.start(*args, env=env) as cli:
                for name, command in hostile.items():
                    await cli.send({"id": name, "to": "vault", "command": command})
                for name, model in [("unknown", "openai/gpt-4o"), ("offered", "openai/parser")]:
                    command = {"type": "Chat", "instruction": name, "chat_model": model}
                    await cli.send({"id": name, "to": "vault", "command": command})
                await cli.close_stdin()
                assert await cli.exit_code() == 0
        nursery.cancel_scope.cancel()
    await listener.aclose()
    assert trap.connections == 0 and trap.received == b"", trap.received
    answers = cli.answers()
    for name in hostile:
        assert answers[name]["error"]["type"] == "InvalidMessage", answers[name]
        assert "made available" in answers[name]["error"]["message"]
    assert "no model named 'openai/gpt-4o'" in answers["unknown"]["error"]["message"]
    assert answers["offered"] == {"id": "offered", "ok": True, "result": "re: offered"}
    assert [request.body["model"] for request in server.requests] == ["parser"]
    assert all(secret not in line for line in cli.stdout + cli.stderr)


async def test_issue14_a_second_process_on_a_store_is_refused_and_names_the_holder(
    tmp_path: Path,
) -> None:
    """A second ``pride run`` on a store in use exits 2 at once, naming the store and the
    holder's pid; the first goes on serving, and ``pride inspect`` can still read."""
    store = tmp_path / "agents.db"
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--store", str(store), "--no-status")
        async with CLI.start(*args, "--exit-on-eof", env=env) as first:
            await first.logged("reading requests on stdin")
            async with CLI.start(*args, env=env) as second:
                assert await second.exit_code() == 2
            [line] = second.stderr
            assert line.startswith("pride run: cannot use the store") and str(store) in line
            assert f"pid {first.process.pid}" in line, line
            with pytest.raises(StoreLocked, match=f"pid {first.process.pid}"):
                async with BranchStore(store):
                    pass
            await first.send(request("r1", "ada", "still mine"))
            assert (await first.answer("r1"))["result"] == "re: still mine"
            inspect = await trio.run_process(
                [*COMMAND, "inspect", str(store)], capture_stdout=True, cwd=ROOT, check=False
            )
            assert inspect.returncode == 0 and b"ada" in inspect.stdout
            await first.close_stdin()
            assert await first.exit_code() == 0
    assert await _stored(store, "ada") == ["You are Ada.", "still mine", "re: still mine"]


async def test_issue14_lone_surrogates_are_refused_in_requests_and_replaced_in_model_output(
    tmp_path: Path,
) -> None:
    """A lone surrogate in a request is an InvalidMessage naming where; one in a model's
    reply becomes U+FFFD, so its answer, its stored row and every later request of the
    branch still encode. The process serves on."""
    store = tmp_path / "agents.db"

    def model(body: dict[str, Any]) -> str:
        text = last_text(body)
        return f"bad {chr(0xD800)} reply" if text == "surrogate, please" else f"re: {text}"

    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--store", str(store), "--no-status", "--exit-on-eof")
        async with CLI.start(*args, env=env) as cli:
            hostile = '{"type": "ChatAndRecord", "instruction": "x \\ud800"}'
            await cli.send(f'{{"id": "r1", "to": "ada", "command": {hostile}}}')
            await cli.send(request("r2", "ada", "surrogate, please"))
            await cli.answer("r2")
            await cli.send(request("r3", "ada", "after"))
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = {answer["id"]: answer for answer in map(codec.parse_json, cli.stdout)}
    assert answers["r1"]["error"]["type"] == "InvalidMessage"
    assert answers["r1"]["error"]["message"].startswith("request.command.instruction: ")
    assert answers["r2"]["result"] == "bad \ufffd reply"
    assert answers["r3"]["result"] == "re: after"
    assert "bad \ufffd reply" in contents(server.requests[-1].body)
    assert await _stored(store, "ada") == [
        "You are Ada.",
        "surrogate, please",
        "bad \ufffd reply",
        "after",
        "re: after",
    ]


async def test_issue14_hostile_request_lines_are_answered_and_serving_goes_on() -> None:
    """A line past --max-line-bytes (answered without being held in memory), binary
    garbage, NUL bytes, deep nesting, a line trickled a byte at a time and a last line
    without a newline: each gets one strict-JSON answer, and valid requests around them
    are served."""
    ok = json.dumps(request("ok", "bob", "fine")).encode()
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--no-status", "--exit-on-eof", "--max-line-bytes", "4096")
        async with CLI.start(*args, env=env) as cli:
            assert cli.process.stdin is not None
            stdin = cli.process.stdin
            await stdin.send_all(b'{"id": "huge", "to": "bob", "command": "' + b"x" * 100_000)
            await stdin.send_all(b'"}\n')
            await stdin.send_all(b"\x00\xff\xfe garbage \x80\n" + b"\x00" * 10 + b"\n")
            await stdin.send_all(b"[" * 3000 + b"\n")
            for byte in ok[:-1]:  # a slow trickle
                await stdin.send_all(bytes([byte]))
            await stdin.send_all(ok[-1:] + b"\n")
            await cli.answer("ok")
            await stdin.send_all(json.dumps(request("last", "bob", "no newline")).encode())
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = [codec.parse_json(line) for line in cli.stdout]
    assert len(answers) == 6, cli.transcript()
    refused = [answer["error"]["message"] for answer in answers if not answer["ok"]]
    assert len(refused) == 4
    assert "longer than 4096 bytes" in refused[0]
    assert all("request" in message for message in refused)
    assert {answer["id"] for answer in answers if answer["ok"]} == {"ok", "last"}


async def test_finished_turns_log_their_usage_and_what_still_runs() -> None:
    """A finished turn's JSON log record has its usage, the tree's, and the turns in flight."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--no-status", "--exit-on-eof", env=env) as cli:
            await cli.send(request("r1", "ada", "slow one"))
            await cli.wait_event(model.held, "ada's slow request")
            await cli.send(request("r2", "bob", "quick"))
            await cli.answer("r2")
            bob = await cli.logged("turn ended")
            model.release.set()
            await cli.answer("r1")
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    assert bob["branch"] == "bob" and bob["in_flight"] == ["ada"]
    assert bob["usage"]["model_calls"] == 1 and bob["usage"]["output_tokens"] > 0
    assert bob["session_usage"]["model_calls"] >= 1
    ada = [r for r in cli.logs() if r["message"].startswith("turn ended") and r["branch"] == "ada"]
    assert ada and ada[0]["in_flight"] == []
    assert ada[0]["session_usage"]["model_calls"] == 2
    assert "tokens (" in ada[0]["message"]


async def test_in_flight_lists_the_turns_running_at_once_and_forgets_failed_ones() -> None:
    """With two turns held at once, each finished or failed turn's record lists exactly
    the turns still running; a failed turn is never listed afterwards."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        async with CLI.start("run", APP, "--no-status", "--exit-on-eof", env=env) as cli:
            await cli.send(request("a1", "ada", "slow one"))
            await cli.wait_event(model.held, "ada's slow request")
            await cli.send(request("b1", "bob", "fail now"))
            assert (await cli.answer("b1"))["ok"] is False
            failed = await cli.logged("turn failed")
            await cli.send(request("b2", "bob", "slow two"))
            await model.wait_holding(2)  # ada's and bob's turns run at once
            model.release.set()
            await cli.answer("a1")
            await cli.answer("b2")
            await cli.send(request("b3", "bob", "quick"))
            await cli.answer("b3")
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    assert failed["branch"] == "bob" and failed["in_flight"] == ["ada"]
    ended = [r for r in cli.logs() if r["message"].startswith("turn ended")]
    assert [r["branch"] for r in ended[2:]] == ["bob"]
    first, second = ended[:2]
    assert {first["branch"], second["branch"]} == {"ada", "bob"}
    assert first["in_flight"] == [second["branch"]] and second["in_flight"] == []
    assert ended[2]["in_flight"] == []


async def test_otel_exports_the_turns_to_an_otlp_collector() -> None:
    """``--otel`` sends every turn's spans to the collector OTEL_EXPORTER_OTLP_* names."""
    async with openai_server(HeldModel()) as server, otlp_collector() as collector:
        env = cli_env(
            PRIDE_TEST_BASE_URL=server.base_url,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector.endpoint,
            OTEL_SERVICE_NAME="pride-test",
        )
        async with CLI.start("run", APP, "--otel", "--no-status", "--exit-on-eof", env=env) as cli:
            await cli.send(request("r1", "ada", "hello"))
            await cli.answer("r1")
            await cli.close_stdin()
            assert await cli.exit_code() == 0  # stopping exports what was queued
    names = collector.names()
    assert "invoke_agent ada" in names and "chat test-model" in names
    turn = next(span for span in collector.spans if span.name == "invoke_agent ada")
    chat = next(span for span in collector.spans if span.name == "chat test-model")
    assert chat.parent_span_id == turn.span_id and chat.trace_id == turn.trace_id
    attributes = {a.key: a.value for a in chat.attributes}
    assert attributes["gen_ai.provider.name"].string_value == "openai"
    assert attributes["server.address"].string_value == "127.0.0.1"
    assert collector.resources[0]["service.name"] == "pride-test"


async def test_otel_without_its_exporter_says_what_to_install() -> None:
    """An OTLP protocol whose exporter is not installed: exit 2 naming the package."""
    env = cli_env(PRIDE_TEST_BASE_URL="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    async with CLI.start("run", APP, "--otel", "--exit-on-eof", env=env) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    [line] = cli.stderr
    assert line.startswith("pride run: ") and "opentelemetry-exporter-otlp-proto-grpc" in line


async def test_a_request_s_counts_are_bounded_and_its_images_inline() -> None:
    """A request asking for a million rounds, or naming an image URL the provider would
    fetch, is answered InvalidMessage naming the field; the process serves on. An image
    under a prefix given with --allow-image-url passes."""
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        flags = ("--no-status", "--exit-on-eof", "--allow-image-url", "https://cdn.example.com/")
        async with CLI.start("run", APP, *flags, env=env) as cli:
            run = {"type": "Run", "instruction": "go", "max_rounds": 10**6}
            await cli.send({"id": "rounds", "to": "ada", "command": run})
            look = {"type": "Chat", "instruction": "look", "images": ["http://169.254.169.254/"]}
            await cli.send({"id": "image", "to": "ada", "command": look})
            cdn = {"type": "Chat", "instruction": "cdn", "images": ["https://cdn.example.com/a"]}
            await cli.send({"id": "cdn", "to": "ada", "command": cdn})
            await cli.send(request("ok", "ada", "still serving"))
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = cli.answers()
    assert answers["rounds"]["error"]["type"] == "InvalidMessage"
    assert answers["rounds"]["error"]["message"].startswith(
        "Run.max_rounds: 1000000 is beyond the ceiling of 100"
    )
    assert answers["image"]["error"]["message"].startswith("Chat.images[0]: ")
    assert "data: URLs only" in answers["image"]["error"]["message"]
    assert answers["cdn"]["ok"]  # the model was sent the allowed URL (it echoes it back)
    assert "'url': 'https://cdn.example.com/a'" in answers["cdn"]["result"]
    assert answers["ok"] == {"id": "ok", "ok": True, "result": "re: still serving"}
    assert server.request_count == 2  # only the good requests reached the model


async def test_an_image_url_prefix_that_allows_every_host_is_a_usage_error() -> None:
    done = await trio.run_process(
        [*COMMAND, "run", APP, "--allow-image-url", "https://"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
        env=cli_env(),
    )
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("pride run: ") and "with a host and a path" in line


async def test_a_request_s_budget_tightens_the_branch_s_and_never_lifts_it() -> None:
    """A request may carry a budget of its own, but a limit the application set on the
    branch still holds: the stricter of the two applies, field by field."""
    async with openai_server(HeldModel()) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        app = "tests.cli.app:budgeted"
        async with CLI.start("run", app, "--no-status", "--exit-on-eof", env=env) as cli:
            lifted = {"type": "Chat", "instruction": "hi", "budget": {"max_model_calls": 5}}
            await cli.send({"id": "lifted", "to": "frugal", "command": lifted})
            await cli.close_stdin()
            assert await cli.exit_code() == 0
    answers = cli.answers()
    assert answers["lifted"]["error"]["type"] == "BudgetExceeded"
    assert server.request_count == 0  # the branch's limit of no model calls held


async def test_at_end_of_input_without_exit_on_eof_it_says_how_to_stop_there() -> None:
    """Issue 35: a pipe into ``pride run`` ends, and the process goes on serving (a
    service's stdin is often /dev/null); the log says so and names the flag that stops."""
    async with CLI.start("run", APP, "--no-status", env=cli_env(PRIDE_TEST_BASE_URL="x")) as cli:
        await cli.close_stdin()
        record = await cli.logged("stdin closed")
        assert "--exit-on-eof" in record["message"], record
        cli.process.send_signal(signal.SIGTERM)
        assert await cli.exit_code() == 0


async def test_a_result_that_cannot_be_written_is_answered_and_serving_goes_on() -> None:
    """A result with no JSON form whose str() raises (an app's object) is answered with
    a line saying so, and the next request is served. Before: the str() raised out of
    the answer's task and the whole process died with a traceback (exit 1), the next
    request unanswered."""
    make = {"id": "made", "to": "ops", "command": {"type": "Call", "operation": "make"}}
    after = {"id": "after", "to": "ops", "command": {"type": "Chat", "instruction": "hi"}}
    args = ("run", "tests.cli.app:unprintable", "--no-status", "--exit-on-eof")
    async with CLI.start(*args, env=cli_env()) as cli:
        await cli.send(make)
        await cli.send(after)
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()
    answers = cli.answers()
    assert answers["made"]["ok"] is True
    assert "Unprintable" in answers["made"]["result"]
    assert "RuntimeError" in answers["made"]["result"]
    assert answers["after"] == {"id": "after", "ok": True, "result": "still here"}


async def test_a_first_sigterm_after_end_of_input_drains_as_one_before_it() -> None:
    """At the end of input (``--exit-on-eof``) every request is answered and the
    process stops, its last answers still waiting for a slow reader of stdout; a
    first SIGTERM then drains as it does before the end of input (the answers get
    what is left of ``--grace``, exit 0), and only a second one forces.

    Before: the end of input's own stop counted as the first signal, so the first
    SIGTERM forced: exit 143, the last answers given 1 s."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--no-status", "--exit-on-eof", "--grace", "30")
        async with CLI.start(*args, env=env, read_stdout=False) as cli:
            big = "x" * 300_000  # its answer is more than a pipe holds: it waits for the reader
            await cli.send(request("big", "ada", big))
            await cli.close_stdin()
            await cli.logged("every request is answered (end of input): stopping")
            cli.process.send_signal(signal.SIGTERM)
            record = await cli.logged("SIGTERM")
            assert record["message"].startswith("SIGTERM: stopping"), cli.transcript()
            cli.read_stdout()
            assert await cli.exit_code() == 0, cli.transcript()
        assert cli.answers()["big"] == {"id": "big", "ok": True, "result": f"re: {big}"}
        assert not [r for r in cli.logs() if "forcing" in r["message"]]


async def test_a_second_sigterm_after_end_of_input_forces() -> None:
    """After the end of input's stop and a first SIGTERM, a second one forces as it
    does before the end of input: exit 143."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(PRIDE_TEST_BASE_URL=server.base_url)
        args = ("run", APP, "--no-status", "--exit-on-eof", "--grace", "30")
        async with CLI.start(*args, env=env, read_stdout=False) as cli:
            await cli.send(request("big", "ada", "x" * 300_000))
            await cli.close_stdin()
            await cli.logged("every request is answered (end of input): stopping")
            cli.process.send_signal(signal.SIGTERM)
            await cli.logged("SIGTERM: stopping")
            cli.process.send_signal(signal.SIGTERM)
            await cli.logged("SIGTERM again: forcing")
            cli.read_stdout()
            assert await cli.exit_code() == 128 + signal.SIGTERM, cli.transcript()
