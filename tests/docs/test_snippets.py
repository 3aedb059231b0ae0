"""Every Python block in README.md and docs/ is a program that runs, or a marked fragment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from pride.testing import openai_server

from .snippets import BASE_URL_ENV, Snippet, as_json, compile_snippet, extract, python_snippets

RUNNER = Path(__file__).with_name("snippets.py")
SNIPPETS = python_snippets()
PROGRAMS = [s for s in SNIPPETS if not s.is_fragment]
FRAGMENTS = [s for s in SNIPPETS if s.is_fragment]

#: Programs that run on a real provider's model with the key from the environment.
ON_A_REAL_MODEL = [
    s
    for s in PROGRAMS
    if "trio.run(" in s.code
    and re.search(r'"(openai|anthropic)/', s.code)
    and "api_key=" not in s.code
]

#: A program the runner must report as failed, with the document's line number.
BROKEN = Snippet("broken.md", 7, "python", "", "x = 1\nraise RuntimeError('broken on purpose')\n")


def test_blocks_are_found() -> None:
    """The docs have runnable programs and marked fragments (the extractor sees both)."""
    assert len(PROGRAMS) >= 10
    assert FRAGMENTS


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.where)
def test_block_compiles(snippet: Snippet) -> None:
    """A program compiles as a module; a fragment compiles with top-level await allowed.

    An unmarked block with a top-level ``await`` or ``async with`` fails here:
    mark it as a fragment or make it a program.
    """
    compile_snippet(snippet)


async def test_programs_run() -> None:
    """Every complete program runs without an error, on the scripted model or the loopback."""
    env = {k: v for k, v in os.environ.items() if k != "PRIDE_CHAT_MODEL"}
    async with openai_server(None, record=False) as server:
        env[BASE_URL_ENV] = server.base_url
        # Snippets that name a real provider need a key to send; the loopback accepts any.
        for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            env[key] = "sk-loopback"
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, str(RUNNER)],
                stdin=as_json([*PROGRAMS, BROKEN]).encode(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=env,
            )
        requests = server.request_count
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    results = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [r["where"] for r in results] == [s.where for s in [*PROGRAMS, BROKEN]], stderr
    failures = [f"{r['where']}:\n{r['error']}" for r in results[:-1] if r["error"]]
    assert not failures, "\n".join(failures)
    # The runner does report a failing program, at the document's line.
    assert 'File "broken.md:7", line 8' in results[-1]["error"]
    # Snippets naming openai/... really went to the loopback server.
    assert requests > 0


def test_extract_reads_the_convention(tmp_path: Path) -> None:
    """Titles mark fragments; fences inside lists are dedented; other languages are kept apart."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        '```python title="fragment: inside a turn"\nawait branch.chat("hi")\n```\n\n'
        "- a list item:\n\n"
        '    ```python title="team.py"\n    import trio\n    ```\n\n'
        "```sh\nmake demo\n```\n",
        encoding="utf-8",
    )
    fragment, program, shell = extract(page)
    assert fragment.is_fragment
    assert (fragment.line, fragment.code) == (4, 'await branch.chat("hi")\n')
    assert (program.is_fragment, program.title, program.code) == (False, "team.py", "import trio\n")
    assert (shell.is_python, shell.lang) == (False, "sh")


@pytest.mark.parametrize("snippet", ON_A_REAL_MODEL, ids=lambda s: s.where)
def test_a_program_on_a_real_model_without_its_key_says_so_in_one_line(
    snippet: Snippet, tmp_path: Path
) -> None:
    """Run as a reader would, with no key set: exit 1 and one line naming the variable.

    Issue 35, item 3: the first programs of docs/index.md and docs/sessions.md
    ended in a 64-line traceback (the README's copy caught ``ProviderError``).
    No request leaves the machine: a missing key fails before any is sent.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PRIDE_CHAT_MODEL"}
    }
    done = subprocess.run(
        [sys.executable, "-c", snippet.code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "no API key for" in lines[0] and "_API_KEY environment variable" in lines[0], lines
