"""``pride run`` with a client that writes requests and does not read its answers.

A full stdout pipe used to block the write on the event loop's thread: the
whole process stopped (no branch advanced) and SIGTERM, even three of them,
was never answered. The answers are now written from a worker thread, and
at most ``--max-pending`` requests are read before their answers are written.
"""

from __future__ import annotations

import signal
from datetime import datetime
from typing import Any

import trio

from pride.messages import codec
from tests.cli.driver import CLI, cli_env


def _chat(number: int) -> dict[str, Any]:
    return {"id": number, "to": "wordy", "command": {"type": "Chat", "instruction": "talk"}}


def _turns_ended(cli: CLI) -> int:
    return sum(1 for record in cli.logs() if record["message"].startswith("turn ended"))


async def test_a_client_that_reads_no_answers_still_gets_sigterm_answered_and_every_answer() -> (
    None
):
    """100 answers of 4 KB (far past a 64 KiB pipe) with nobody reading: every turn
    still runs, SIGTERM still stops the process, and once the client reads it gets
    all 100 answers and exit status 0. Before: the process froze after ~16 answers,
    in write(2) on its event loop, and no signal was ever answered."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="4000")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--exit-on-eof", "--grace", "60")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        for number in range(100):
            await cli.send(_chat(number))
        await cli.until(lambda: _turns_ended(cli) == 100, "all 100 turns to end")
        cli.process.send_signal(signal.SIGTERM)
        await cli.logged("SIGTERM: stopping")
        cli.read_stdout()
        assert await cli.exit_code() == 0, cli.transcript()
    answers = [codec.parse_json(line) for line in cli.stdout]
    assert sorted(answer["id"] for answer in answers) == list(range(100))
    assert all(answer["ok"] and answer["result"] == "x" * 4000 for answer in answers)


async def test_a_client_that_reads_no_answers_is_read_no_further_than_max_pending() -> None:
    """With --max-pending 8 and answers bigger than the pipe, exactly 8 of 20 requests
    are read while nobody reads stdout (the other 12 wait in the client's pipe, so the
    process holds 8 answers, not 20); stopped, it answers exactly those 8."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="100000")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--max-pending", "8", "--grace", "60")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        for number in range(20):
            await cli.send(_chat(number))
        await cli.until(lambda: _turns_ended(cli) == 8, "8 turns to end")
        cli.process.send_signal(signal.SIGTERM)
        await cli.logged("SIGTERM: stopping")
        cli.read_stdout()
        assert await cli.exit_code() == 0, cli.transcript()
    answers = [codec.parse_json(line) for line in cli.stdout]
    assert [answer["id"] for answer in answers] == list(range(8)), cli.transcript()
    assert all(answer["ok"] for answer in answers)
    assert _turns_ended(cli) == 8


async def test_answers_lost_to_a_closed_stdout_make_the_exit_status_3() -> None:
    """The reader of stdout goes away (closes its end) and three requests are answered
    into the broken pipe: the process serves on, logs how many answer lines were lost,
    and exits 3 at end of input, so its supervisor learns that work was lost. Before:
    the loss was logged and the exit status was 0, as for a clean drain."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="3")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--exit-on-eof")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        assert cli.process.stdout is not None
        await cli.process.stdout.aclose()
        for number in range(3):
            await cli.send(_chat(number))
        await cli.close_stdin()
        assert await cli.exit_code() == 3, cli.transcript()
    assert _turns_ended(cli) == 3
    record = await cli.logged("answer lines were not written")
    assert record["level"] == "ERROR" and record["message"].startswith("3 answer lines")


def _at(record: dict[str, Any]) -> float:
    """A log record's time, in seconds."""
    return datetime.fromisoformat(record["time"]).timestamp()


async def test_after_sigterm_an_unread_stdout_is_waited_for_once_within_the_grace() -> None:
    """SIGTERM with an answer bigger than the pipe and nobody reading stdout: the drain
    waits for stdout for the grace period once, then exits 3 (answers lost). Before:
    the serving part gave up after the grace, and the process's last flush waited a
    whole grace again for the same stuck write."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="1000000")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--grace", "1")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        await cli.send(_chat(1))
        await cli.until(lambda: _turns_ended(cli) == 1, "the turn to end")
        cli.process.send_signal(signal.SIGTERM)
        sent = trio.current_time()
        signalled = await cli.logged("SIGTERM: stopping")
        assert await cli.exit_code() == 3, cli.transcript()
        # The process itself ends then: the write stuck in its worker thread holds nothing.
        assert trio.current_time() - sent < 5, cli.transcript()
    lost = await cli.logged("answer lines were not written")
    assert lost["message"].startswith("1 answer lines"), lost
    took = _at(lost) - _at(signalled)
    assert 0.9 <= took < 1.8, f"{took:.2f} s from SIGTERM to the exit's record\n{cli.transcript()}"


async def test_turns_and_an_unread_stdout_share_one_grace_after_sigterm() -> None:
    """SIGTERM with a turn that runs on and an unread stdout: the turn has the grace
    period, and stdout's wait ends with the same deadline (the last answers get
    `FORCED_FLUSH`, a second, past it), not a second grace of its own."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="1000000")
    args = ("run", "tests.cli.app:wordy_and_stuck_turns", "--no-status", "--grace", "2")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        await cli.send(_chat(1))
        await cli.until(lambda: _turns_ended(cli) == 1, "the wordy turn to end")
        await cli.send({"id": 2, "to": "sleeper", "command": {"type": "Chat", "instruction": "z"}})
        await cli.until(lambda: "sleeper: turn running" in cli.stderr, "the sleeper's turn")
        cli.process.send_signal(signal.SIGTERM)
        signalled = await cli.logged("SIGTERM: stopping")
        assert await cli.exit_code() == 3, cli.transcript()
    lost = await cli.logged("answer lines were not written")
    assert lost["message"].startswith("2 answer lines"), lost
    took = _at(lost) - _at(signalled)
    # One grace (2 s) and the last answers' second; two graces would be 4 s.
    assert 1.9 <= took < 3.6, f"{took:.2f} s from SIGTERM to the exit's record\n{cli.transcript()}"


async def test_a_second_sigterm_cuts_the_wait_for_an_unread_stdout_to_a_second() -> None:
    """With a long grace and nobody reading stdout, a second SIGTERM forces: the wait
    for stdout ends `FORCED_FLUSH` (a second) later, and the exit status is 143."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="1000000")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--grace", "30")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        await cli.send(_chat(1))
        await cli.until(lambda: _turns_ended(cli) == 1, "the turn to end")
        cli.process.send_signal(signal.SIGTERM)
        await cli.logged("branch wordy stopped")  # the tree is down; stdout is waited for
        cli.process.send_signal(signal.SIGTERM)
        forced = await cli.logged("SIGTERM again: forcing")
        assert await cli.exit_code() == 143, cli.transcript()
    lost = await cli.logged("answer lines were not written")
    took = _at(lost) - _at(forced)
    assert took < 1.8, f"{took:.2f} s from the second SIGTERM to the exit\n{cli.transcript()}"


async def test_at_end_of_input_a_slow_reader_is_waited_for_past_the_grace() -> None:
    """End of input with --exit-on-eof and nobody reading stdout yet: no signal, so
    the answers are waited for however long the reader takes (a pipeline's slow
    consumer gets every answer), not cut at the grace period that bounds a
    signal's drain: still running three graces on, and once stdout is read the
    answer arrives whole and the exit status is 0."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="1000000")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--grace", "0.1", "--exit-on-eof")
    async with CLI.start(*args, env=env, read_stdout=False) as cli:
        await cli.send(_chat(1))
        await cli.until(lambda: _turns_ended(cli) == 1, "the turn to end")
        await cli.close_stdin()
        await cli.logged("branch wordy stopped")  # the tree is down; stdout is waited for
        with trio.move_on_after(0.3) as waited:  # three graces: a bound, not a sync
            await cli.process.wait()
        assert waited.cancelled_caught, cli.transcript()
        cli.read_stdout()
        assert await cli.exit_code() == 0, cli.transcript()
        assert len((await cli.answer(1))["result"]) >= 1_000_000
    assert "not written" not in cli.stderr
