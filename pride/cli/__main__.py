"""``python -m pride.cli``: the same as the ``pride`` console script."""

from . import main

main()
