"""Who may reach what: bearer tokens with their scopes.

**Tokens.** Every request but the health checks carries ``Authorization:
Bearer TOKEN``. Tokens come from ``PRIDE_SERVE_TOKEN`` (one token that
reaches every branch) and ``--token-file FILE``: one token per line,
optionally followed by the branch names or globs it may reach
(``s3cret-for-support support-* faq``); blank lines and lines starting with
``#`` are skipped. With none configured the process makes one at start and
prints it on standard error, as Jupyter does: it never serves
unauthenticated. A token is compared by its SHA-256 digest against every
configured one, each with ``hmac.compare_digest`` and without stopping at a
match, so the time taken says nothing about which token came close.

The Host and Origin checks are `pride.messages.origins.Guard`, shared with
``pride mcp --http``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from pathlib import Path

import attrs

__all__ = ["MIN_TOKEN_LENGTH", "Grant", "TokenError", "Tokens"]

MIN_TOKEN_LENGTH = 16
"""The shortest token accepted: a short one could be guessed over the network."""


class TokenError(ValueError):
    """The token configuration cannot be used; the message says why and where."""


@attrs.frozen
class Grant:
    """What one token reaches.

    Attributes:
        label: how logs name the token (``"PRIDE_SERVE_TOKEN"``, ``"tokens.txt line 3"``).
        scopes: branch names or globs (``fnmatch``); empty means every branch.
    """

    label: str
    scopes: tuple[str, ...] = ()

    def reaches(self, name: str) -> bool:
        """True when this token may reach the branch called ``name``."""
        if not self.scopes:
            return True
        return any(fnmatch.fnmatchcase(name, scope) for scope in self.scopes)


@attrs.frozen
class _Entry:
    digest: bytes
    grant: Grant


def _digest(token: str | bytes) -> bytes:
    raw = token.encode("utf-8", "surrogateescape") if isinstance(token, str) else token
    return hashlib.sha256(raw).digest()


class Tokens:
    """The configured tokens; `grant` finds the one a request presents."""

    def __init__(self, entries: Iterable[tuple[str, Grant]]) -> None:
        self._entries = tuple(_Entry(_digest(token), grant) for token, grant in entries)
        if not self._entries:
            raise TokenError("no token configured")

    @classmethod
    def load(cls, env_token: str | None, file: Path | None) -> tuple[Tokens, str | None]:
        """The tokens of ``PRIDE_SERVE_TOKEN`` and ``--token-file``; with neither, a
        fresh one. Returns the tokens, and the generated token (None when configured).

        Raises:
            TokenError: the file cannot be read, or a token is too short.
        """
        entries: list[tuple[str, Grant]] = []
        if env_token:
            _check_length(env_token.strip(), "PRIDE_SERVE_TOKEN")
            entries.append((env_token.strip(), Grant("PRIDE_SERVE_TOKEN")))
        if file is not None:
            entries.extend(_read_file(file))
        if entries:
            return cls(entries), None
        token = secrets.token_urlsafe(32)
        return cls([(token, Grant("the generated token"))]), token

    def grant(self, authorization: bytes | None) -> Grant | None:
        """The grant of the bearer token in an ``Authorization`` header, or None."""
        if authorization is None:
            return None
        scheme, _, token = authorization.strip().partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return None
        presented = _digest(token.strip())
        found: Grant | None = None
        for entry in self._entries:  # every entry, a match or not: constant time
            if hmac.compare_digest(presented, entry.digest):
                found = entry.grant
        return found


def _check_length(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(
            f"{where}: a token needs at least {MIN_TOKEN_LENGTH} characters "
            "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


def _read_file(path: Path) -> list[tuple[str, Grant]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"cannot read the token file {path}: {exc}") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        where = f"{path} line {number}"
        _check_length(words[0], where)
        entries.append((words[0], Grant(f"{path.name} line {number}", tuple(words[1:]))))
    if not entries:
        raise TokenError(f"the token file {path} holds no token")
    return entries
