"""ApiKey: where a model's API key comes from, and the one place it is read.

A key given to the model is kept here and nowhere else; otherwise the
provider's environment variable is read at each call, so a key set (or
rotated) after the model was built is used. Neither ever appears in a repr,
a message or a projection: `ApiKey.describe` says where the key comes from,
never what it is.
"""

from __future__ import annotations

import os

from pride.errors import AuthenticationFailed

__all__ = ["ApiKey"]


class ApiKey:
    """A model's credentials: an explicit key, else an environment variable.

    Args:
        given: the key passed to the model (``None``: read ``env``).
        env: the provider's environment variable (``None`` or ``""``: none).
        required: the provider refuses calls without a key.
    """

    __slots__ = ("_given", "env", "required")

    def __init__(self, given: str | None, env: str | None, required: bool) -> None:
        self._given = given
        self.env = env
        self.required = required

    def read(self, provider: str, url: str | None) -> str | None:
        """The key for a call now: the given one, else the environment's.

        Raises:
            AuthenticationFailed: the provider needs a key and none is set; the
                message names the environment variable to set (``api_key=`` for a
                provider without one).
        """
        if self._given:
            return self._given
        if self.env:
            key = os.environ.get(self.env)
            if key:
                return key
        if self.required:
            # The variable is what every reader can set (a `pride chat` user has no
            # code to pass api_key= in); a provider without one has only the keyword.
            fix = f"set the {self.env} environment variable" if self.env else "pass api_key="
            raise AuthenticationFailed(
                f"{provider}: no API key for {url}: {fix}", provider=provider, url=url
            )
        return None

    def describe(self) -> str:
        """Where the key comes from, for a repr: ``'***'``, ``<from $VAR>`` or ``None``."""
        if self._given:
            return "'***'"
        if self.env:
            return f"<from ${self.env}>"
        return "None"
