"""``pride serve --console``: the live console's page, its assets, and its sign-in.

The console is one page (``GET /``) and its script and style sheet
(``GET /console/NAME``), files shipped inside this package
(``pride/serve/console/``): nothing is fetched from anywhere else, so it works
offline, and nothing is built. The page reads the native API the way any
client does (``/v1/branches``, ``/v1/events``, ...); this module only serves
the files and lets a browser sign in.

**Sign-in.** A browser cannot send ``Authorization: Bearer`` on a page load or
an ``EventSource``, so the token is given once, in the address
(``/?token=TOKEN``, the link ``pride serve`` prints), and exchanged for a
cookie: a fresh random secret standing for that token's grant, ``HttpOnly``
(the page's script cannot read it, so an injected script cannot carry it
off), ``SameSite=Strict`` (another site's page cannot make the browser send
it), ``Path=/``, named with the port (cookies are not kept apart by port, so
two servers on one host would otherwise overwrite each other's). The answer
is a redirect to ``/``, so the token leaves the address bar and the history.
A wrong token is 401, and no cookie is set.

Secrets live in this process's memory only: a restart signs every browser
out. At most `MAX_LOGINS` are kept; the oldest go first.

**Requests that change state.** A request authenticated by the cookie and not
a ``GET`` (an approval's decision, say) must carry an ``Origin`` header naming
the server itself: browsers send it on every such request, and a request
forged from elsewhere cannot carry it (checked in `pride.serve._asgi`).
"""

from __future__ import annotations

import collections
import hashlib
import secrets
from importlib import resources
from urllib.parse import quote

from ._auth import Grant, Tokens
from ._http import HttpError, Request, respond

__all__ = ["ASSETS", "MAX_LOGINS", "Logins", "asset", "page"]

MAX_LOGINS = 1024
"""Browser sign-ins kept at once; past that the oldest is signed out."""

ASSETS: dict[str, bytes] = {
    "console.js": b"text/javascript; charset=utf-8",
    "console.css": b"text/css; charset=utf-8",
    "markdown.js": b"text/javascript; charset=utf-8",
}
"""The files under ``/console/`` and their types (nothing else is served from there)."""

# The page loads its own files only: no inline script or style, no other origin.
# An injection that got past the renderer would still run nothing.
_PAGE_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

_SIGN_IN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pride console: sign in</title>
<link rel="icon" href="data:,"></head>
<body><h1>pride console</h1><p>{reason}</p>
<form method="get" action="/"><label>Token <input name="token" type="password"
autocomplete="off" autofocus></label> <button type="submit">Sign in</button></form>
<p>The link <code>pride serve</code> prints holds the token; or use one of
<code>PRIDE_SERVE_TOKEN</code> and <code>--token-file</code>.</p></body></html>
"""


class Logins:
    """The browsers signed in to one server: cookie secrets and the grants they stand for.

    Args:
        port: the server's port, part of the cookie's name.
    """

    def __init__(self, port: int) -> None:
        self.cookie_name = f"pride_console_{port}"
        self._grants: collections.OrderedDict[bytes, Grant] = collections.OrderedDict()

    def sign_in(self, grant: Grant) -> str:
        """A fresh secret for ``grant``; the value of a ``Set-Cookie`` header carrying it."""
        secret = secrets.token_urlsafe(32)
        self._grants[_digest(secret)] = grant
        while len(self._grants) > MAX_LOGINS:
            self._grants.popitem(last=False)
        return f"{self.cookie_name}={secret}; Path=/; HttpOnly; SameSite=Strict"

    def grant(self, cookie: bytes | None) -> Grant | None:
        """The grant of the console cookie in a ``Cookie`` header, or None.

        Secrets are looked up by their SHA-256 digest, so how long the lookup
        takes says nothing about the secrets held.
        """
        if cookie is None:
            return None
        wanted = self.cookie_name.encode() + b"="
        for raw in cookie.split(b";"):
            part = raw.strip()
            if part.startswith(wanted):
                found = self._grants.get(_digest(part[len(wanted) :]))
                if found is not None:
                    return found
        return None


def _digest(secret: str | bytes) -> bytes:
    raw = secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret
    return hashlib.sha256(raw).digest()


def _file(name: str) -> bytes:
    return (resources.files(__package__) / "console" / name).read_bytes()


async def page(request: Request, tokens: Tokens, logins: Logins, grant: Grant | None) -> None:
    """``GET /``: sign a browser in with ``?token=``, else the console page (or the sign-in).

    Args:
        request: the request.
        tokens: the server's tokens, for ``?token=``.
        logins: the server's browser sign-ins.
        grant: the request's own credentials (a bearer token or the cookie), or None.

    Raises:
        HttpError: 405 for a method other than GET or HEAD.
    """
    if request.method not in ("GET", "HEAD"):
        raise HttpError(405, "MethodNotAllowed", "/ answers GET", headers=[(b"allow", b"GET")])
    if "token" in request.query:
        presented = request.query["token"].encode("utf-8", "surrogateescape")
        given = tokens.grant(b"Bearer " + presented)
        if given is None:
            await _sign_in_page(request, 401, "That token is not one of this server's.")
            return
        await respond(
            request.send,
            303,
            b"",
            b"text/plain",
            [(b"location", b"/"), (b"set-cookie", logins.sign_in(given).encode())],
        )
        return
    if grant is None:
        await _sign_in_page(request, 401, "Sign in with this server's token.")
        return
    await respond(
        request.send, 200, _file("index.html"), b"text/html; charset=utf-8", _PAGE_HEADERS
    )


async def asset(request: Request, name: str) -> None:
    """``GET /console/NAME``: one of the page's files (`ASSETS`).

    Raises:
        HttpError: 404 for a name that is not one of them; 405 for a method but GET.
    """
    if name not in ASSETS:
        raise HttpError(404, "NotFound", f"the console has no file {quote(name)!r}")
    if request.method not in ("GET", "HEAD"):
        raise HttpError(405, "MethodNotAllowed", "the console's files answer GET")
    await respond(request.send, 200, _file(name), ASSETS[name], _PAGE_HEADERS[1:2])


async def _sign_in_page(request: Request, status: int, reason: str) -> None:
    body = _SIGN_IN.format(reason=reason).encode()
    await respond(request.send, status, body, b"text/html; charset=utf-8", _PAGE_HEADERS)
