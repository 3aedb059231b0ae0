"""``pride run`` whose parent pipes standard error and never reads it.

Logging wrote each record to stderr on the event loop's thread, so once the
pipe was full (64 KiB: a few hundred failed requests, each logged) the whole
process stopped in write(2): no request was answered, no signal either.
"""

from __future__ import annotations

import json

from pride.cli._logs import MAX_BUFFERED, MAX_MESSAGE
from tests.cli.driver import CLI, cli_env

NOBODY = "X" * 4000
"""A branch no app has, named in each failed request's record (about 4 KB a record)."""
REQUESTS = (MAX_BUFFERED + 65536) // len(NOBODY) + 50
"""Failed requests, each logged: more than the pipe and the queue hold together.
(Bad request lines no longer serve: past the first few they are counted, not logged.)"""


async def test_a_parent_that_never_reads_stderr_does_not_stall_the_process() -> None:
    """~330 requests to a branch that does not exist (each answered and logged, 4 KB a
    record) and one good request, with stderr never read: every request is answered,
    end of input ends the process with status 0, and the records past what the pipe
    and the queue hold are dropped, one record counting them. A record quoting 100,000
    characters is logged cut. Before: the process stalled in write(2) after ~15
    records, answering no later line."""
    env = cli_env(PRIDE_TEST_REPLY_BYTES="3")
    args = ("run", "tests.cli.app:wordy", "--no-status", "--exit-on-eof")
    chat = {"type": "Chat", "instruction": "hi"}
    async with CLI.start(*args, env=env, read_stderr=False) as cli:
        for number in range(REQUESTS):
            await cli.send({"id": number, "to": NOBODY, "command": chat})
        await cli.send({"id": "good", "to": "wordy", "command": chat})
        assert (await cli.answer("good"))["result"] == "xxx"
        cli.read_stderr()  # now the queue drains, and says how many were dropped
        await cli.logged("log records were dropped")
        await cli.send({"id": "long", "to": "Y" * 100_000, "command": chat})
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()[-3000:]
    answers = cli.answers()
    assert all(answers[number]["error"]["type"] == "UnknownBranch" for number in range(REQUESTS))
    assert answers["long"]["error"]["type"] == "UnknownBranch"
    records = cli.logs()
    dropped = [r for r in records if "log records were dropped" in r["message"]]
    assert len(dropped) == 1, cli.transcript()[-3000:]
    logged = sum(1 for r in records if NOBODY in r["message"])
    assert int(dropped[0]["message"].split()[0]) + logged == REQUESTS
    (long,) = [r for r in records if "YYYY" in r["message"]]
    assert len(json.dumps(long)) < MAX_MESSAGE + 1000
    assert long["message"].endswith("more characters cut)")
