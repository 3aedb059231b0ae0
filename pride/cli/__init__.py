"""The ``pride`` command: ``pride chat``, ``pride run`` and ``pride inspect``.

``pride chat`` is an interactive REPL on one branch; ``pride run APP`` runs a
supervisor tree as a long-running process taking JSON-line requests on
standard input; ``pride inspect STORE`` reads a branch store. See
``docs/cli.md`` for every option, the request protocol, the exit statuses
and the shutdown sequence.
"""

from ._app import app as app, main as main

__all__ = ["app", "main"]
