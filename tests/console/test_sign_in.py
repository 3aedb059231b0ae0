"""Signing a browser in to the console: the token once, then an HttpOnly, SameSite=Strict
cookie; a wrong token and a foreign Origin refused."""

from __future__ import annotations

import httpx

from tests import chromium
from tests.console.conftest import sign_in
from tests.serve.conftest import TOKEN, Served


def _cookie_name(served: Served) -> str:
    return f"pride_console_{served.url.rsplit(':', 1)[1]}"


async def test_the_token_becomes_an_http_only_strict_cookie(
    browser: chromium.Browser, console: Served
) -> None:
    """The browser keeps a cookie its pages' scripts cannot read and other sites
    cannot make it send; the token is nowhere in it."""
    page = await sign_in(browser, console)
    cookies = (await page.call("Network.getCookies", {"urls": [console.url]}))["cookies"]
    (cookie,) = [c for c in cookies if c["name"] == _cookie_name(console)]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/"
    assert cookie["session"] is True
    assert TOKEN not in cookie["value"]
    assert await page.evaluate("document.cookie") == ""
    assert page.errors == []


async def test_the_sign_in_answer_redirects_without_the_token(console: Served) -> None:
    """``/?token=`` answers 303 to ``/`` with the cookie; the cookie alone then
    reaches the page and the API, and a bearer token still works beside it."""
    async with httpx.AsyncClient(base_url=console.url) as client:
        answer = await client.get("/", params={"token": TOKEN})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/"
        set_cookie = answer.headers["set-cookie"]
        assert set_cookie.startswith(_cookie_name(console) + "=")
        attributes = {part.strip() for part in set_cookie.split(";")[1:]}
        assert attributes == {"Path=/", "HttpOnly", "SameSite=Strict"}
        page = await client.get("/")
        assert page.status_code == 200
        assert "text/html" in page.headers["content-type"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
        tree = await client.get("/v1/branches")
        assert tree.status_code == 200
        assert tree.json()["ok"] is True
        script = await client.get("/console/console.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]


async def test_a_wrong_token_is_refused(console: Served) -> None:
    """A wrong token in the link is 401 with the sign-in form and no cookie; a made-up
    cookie signs nothing in; the page and its files need one or the other."""
    async with httpx.AsyncClient(base_url=console.url) as client:
        answer = await client.get("/", params={"token": "not-the-token-0123456789"})
        assert answer.status_code == 401
        assert "set-cookie" not in answer.headers
        assert "<form" in answer.text
        assert not client.cookies
        for path in ("/", "/console/console.js", "/v1/branches"):
            refused = await client.get(path)
            assert refused.status_code == 401, path
        forged = {"Cookie": f"{_cookie_name(console)}=made-up-secret"}
        assert (await client.get("/v1/branches", headers=forged)).status_code == 401
        missing = await client.get("/console/nothing.js", headers={"Cookie": ""})
        assert missing.status_code == 401


async def test_a_state_change_signed_by_the_cookie_needs_the_console_s_origin(
    console: Served,
) -> None:
    """With the cookie, a POST from a foreign Origin is 403, and so is one with no
    Origin (a browser always sends one); from the console's own origin it goes
    through. A bearer token's request needs no Origin (a program, not a page)."""
    command = {"command": {"type": "ChatAndRecord", "instruction": "hello"}}
    async with httpx.AsyncClient(base_url=console.url) as client:
        assert (await client.get("/", params={"token": TOKEN})).status_code == 303
        foreign = await client.post(
            "/v1/branches/critic/ask", json=command, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        no_origin = await client.post("/v1/branches/critic/ask", json=command)
        assert no_origin.status_code == 403
        assert no_origin.json()["error"]["type"] == "Forbidden"
        own = await client.post(
            "/v1/branches/critic/ask", json=command, headers={"Origin": console.url}
        )
        assert own.status_code == 200, own.text
        assert own.json()["result"] == "echo: hello"
    async with httpx.AsyncClient(base_url=console.url, headers=console.headers()) as program:
        assert (await program.post("/v1/branches/critic/ask", json=command)).status_code == 200
