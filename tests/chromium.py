"""Headless Chromium for tests, driven over the DevTools protocol, with no network.

The browser is the system's own (Debian's ``chromium`` package; never one
downloaded at run time). It runs with ``--remote-debugging-pipe``: the
protocol's JSON messages, each ended by a NUL byte, travel on the child's
file descriptors 3 (commands in) and 4 (replies and events out), so no port is
opened and no other process can drive it.

The browser has no network: every host name resolves to nothing and every
request that is not for loopback goes to a proxy on a closed port. A
:class:`Page` also records each URL it requested, so a test can assert that
a page asked nothing of anywhere but the local server it was given.

Use::

    async with launch(tmp_path) as browser:
        page = await browser.new_page()
        await page.goto("http://127.0.0.1:8000/")
        await page.type("mailbox")
        title = await page.evaluate("document.title")
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

TIMEOUT = 30.0
"""Seconds one command or wait may take: far above what any takes here (well
under a second), so only a browser that is stuck fails a test on time."""

INSTALL = (
    "headless Chromium is needed for this test and was not found on PATH: "
    "install Debian's package (`apt-get install chromium`), or set PRIDE_CHROMIUM "
    "to a Chromium or Chrome executable"
)

REQUIRED = "PRIDE_REQUIRE_CHROMIUM"
"""Set (to anything but empty) where a missing browser must fail the browser
tests instead of skipping them: ``.ci/run`` installs Chromium and sets it, so
CI can never pass without having run them."""

# Flags for a quiet, disposable, offline browser. --no-sandbox because the
# suite may run as root (in a container), where Chromium's sandbox refuses to
# start; the pages it opens are the project's own build output.
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers give /dev/shm 64 MB; the renderer needs more
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=127.0.0.1:9",  # loopback bypasses a proxy; everything else goes nowhere
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    """Chromium failed a command, threw in a page, or exited."""


def _found() -> str | None:
    return os.environ.get("PRIDE_CHROMIUM") or shutil.which("chromium")


def executable() -> str:
    """The Chromium to run: ``$PRIDE_CHROMIUM``, else ``chromium`` on PATH.

    Raises:
        BrowserError: there is none; the message says how to install it.
    """
    found = _found()
    if not found:
        raise BrowserError(INSTALL)
    return found


needed = pytest.mark.skipif(
    _found() is None and not os.environ.get(REQUIRED),
    reason=INSTALL,
)
"""Mark a browser test (or a module, as ``pytestmark``) with this: a developer's
machine without Chromium skips it and the run ends by saying so plainly
(tests/conftest.py); with :data:`REQUIRED` set it runs, and fails for want of
a browser."""


class Browser:
    """One Chromium process and its protocol connection."""

    def __init__(self, commands: trio.abc.SendStream, replies: trio.abc.ReceiveStream) -> None:
        self._commands = commands
        self._replies = replies
        self._next_id = 0
        self._waiting: dict[int, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self._pages: dict[str, Page] = {}
        self._closed: str | None = None

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """Send one protocol command and return its ``result``.

        Raises:
            BrowserError: Chromium answered with an error, or exited first.
            trio.TooSlowError: no answer within :data:`TIMEOUT`.
        """
        if self._closed is not None:
            raise BrowserError(self._closed)
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        done = trio.Event()
        answer: list[dict[str, Any]] = []
        self._waiting[self._next_id] = (done, answer)
        try:
            await self._commands.send_all(json.dumps(message).encode() + b"\0")
            with trio.fail_after(TIMEOUT):
                await done.wait()
        finally:
            self._waiting.pop(message["id"], None)
        if not answer:
            raise BrowserError(f"{method}: {self._closed}")
        if "error" in answer[0]:
            raise BrowserError(f"{method}: {answer[0]['error']}")
        result: dict[str, Any] = answer[0].get("result", {})
        return result

    async def new_page(self) -> Page:
        """Open a blank tab and attach to it."""
        target = await self.call("Target.createTarget", {"url": "about:blank"})
        attached = await self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self, attached["sessionId"])
        self._pages[page.session] = page
        for domain in ("Page", "Runtime", "Network", "Log"):
            await self.call(f"{domain}.enable", session=page.session)
        return page

    async def _read(self) -> None:
        """Deliver replies to their callers and events to their page, until Chromium exits."""
        buffer = b""
        while chunk := await self._replies.receive_some():
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                self._deliver(json.loads(raw))
        self._closed = "Chromium closed the DevTools pipe (it exited)"
        for done, _answer in self._waiting.values():
            done.set()

    def _deliver(self, message: dict[str, Any]) -> None:
        if "id" in message:
            if (waiting := self._waiting.get(message["id"])) is not None:
                done, answer = waiting  # else its caller timed out and left
                answer.append(message)
                done.set()
        elif (page := self._pages.get(message.get("sessionId", ""))) is not None:
            page._on_event(message["method"], message.get("params", {}))


class Page:
    """One tab: navigate, type, evaluate JavaScript, and the requests it made."""

    def __init__(self, browser: Browser, session: str) -> None:
        self._browser = browser
        self.session = session
        self.requests: list[str] = []
        """Every URL the page asked for, in order (its workers' imports included)."""
        self.errors: list[str] = []
        """What the browser's console showed as errors: uncaught exceptions,
        ``console.error`` calls, and the browser's own error entries (a failed
        load, a refused script)."""
        self._loaded = trio.Event()

    async def goto(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event.

        Raises:
            BrowserError: the navigation failed (an unreachable server, a missing file).
        """
        self._loaded = trio.Event()
        navigated = await self._browser.call("Page.navigate", {"url": url}, session=self.session)
        if navigated.get("errorText"):
            raise BrowserError(f"navigating to {url}: {navigated['errorText']}")
        with trio.fail_after(TIMEOUT):
            await self._loaded.wait()

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page; a promise is awaited.

        Raises:
            BrowserError: the expression threw, or its promise rejected.
        """
        result = await self._browser.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            thrown = details.get("exception", {}).get("description", details.get("text"))
            raise BrowserError(f"JavaScript threw: {thrown}")
        return result["result"].get("value")

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One DevTools protocol command for this tab (see `Browser.call`)."""
        return await self._browser.call(method, params, session=self.session)

    async def click(self, selector: str) -> None:
        """Click the middle of the first element ``selector`` matches, as a mouse does.

        Raises:
            BrowserError: nothing matches it.
        """
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if box is None:
            raise BrowserError(f"nothing matches {selector!r} to click")
        for kind in ("mousePressed", "mouseReleased"):
            await self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
            )

    async def screenshot(self, path: Path) -> None:
        """Write what the tab shows to ``path`` as PNG."""
        shot = await self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))

    async def type(self, text: str) -> None:
        """Type ``text`` into the focused element, one key press per character."""
        for char in text:
            for kind in ("keyDown", "keyUp"):
                params = {"type": kind, "key": char}
                if kind == "keyDown":
                    params["text"] = char
                await self._browser.call("Input.dispatchKeyEvent", params, session=self.session)

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description", details["text"]))
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"{params['entry']['text']} ({params['entry'].get('url', '')})")


@asynccontextmanager
async def launch(profile: Path) -> AsyncIterator[Browser]:
    """Run a headless Chromium with its profile in ``profile``, closed on exit.

    Args:
        profile: an empty directory for the browser's profile (``tmp_path``).

    Raises:
        BrowserError: no Chromium is installed (the message says how to
            install one), or it exited before answering.

    Cancellation:
        On exit the browser is asked to close and, failing that within a few
        seconds, killed; both run shielded.
    """
    chromium = executable()
    to_browser, commands = os.pipe()
    replies, from_browser = os.pipe()
    log = (profile / "chromium.log").open("wb")
    # bash (dash takes no two-digit descriptors) puts the pipe's ends on the
    # descriptors Chromium expects (3 and 4), closes the originals, and
    # becomes Chromium.
    script = f'exec "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
    try:
        process = await trio.lowlevel.open_process(
            ["bash", "-c", script, "bash", chromium, *_FLAGS, f"--user-data-dir={profile}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(to_browser, from_browser),
        )
    finally:
        os.close(to_browser)
        os.close(from_browser)
        log.close()
    browser = Browser(trio.lowlevel.FdStream(commands), trio.lowlevel.FdStream(replies))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(browser._read)
            try:
                await browser.call("Browser.getVersion")
            except BrowserError as exc:
                tail = (profile / "chromium.log").read_text(errors="replace")[-2000:]
                raise BrowserError(f"{chromium} did not start: {exc}\n{tail}") from None
            yield browser
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The reader never fails, so a group holds the one error of the body
        # (or of the start-up): the caller gets that error, not a group.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        with trio.CancelScope(shield=True):
            # The reader is gone, so the close is sent without awaiting its reply.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await browser._commands.send_all(b'{"id": 0, "method": "Browser.close"}\0')
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await browser._commands.aclose()
            await browser._replies.aclose()
