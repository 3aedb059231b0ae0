"""Public classes and functions name the module a user imports them from.

``pride.Branch`` is written in a module of pride's actor runtime, but its
reader imports it from ``pride``: its ``__module__`` should say so, so that
reprs, tracebacks, ``help()`` and pickles show the path a user can write.
Each package face calls `publish` on its ``__all__`` once its imports are
done; ``pride`` itself runs last, so a name exported from both ``pride`` and a
subpackage shows ``pride``.

What moving ``__module__`` would break, and how `publish` keeps it working:

* Pickles (and Ray, which pickles classes by module and qualified name)
  look an object up as ``module.qualname``: only an object exported under its
  own ``__name__``, at the top of its module, is moved, so the new path
  resolves to the same object.
* ``typing.get_type_hints`` (and attrs and cattrs, which call it) evaluates a
  class's string annotations in the globals of ``sys.modules[cls.__module__]``,
  where the names those annotations use may not exist. Before the move, a
  class's own string annotations are evaluated where they were written and
  stored as the objects they name; an annotation that did not evaluate there
  either is left as it was.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Iterable, MutableMapping
from typing import Any

__all__ = ["publish"]


def publish(namespace: MutableMapping[str, Any], names: Iterable[str], home: str) -> None:
    """Give each class and function named in ``names`` the ``__module__`` ``home``.

    ``namespace`` is the package face's globals (where each name is bound) and
    ``home`` its module name. Only objects written inside ``home``'s package
    move (``pride`` takes every pride object it exports; ``pride.llm`` only
    llm's own), and only those bound under their own name: an alias would
    not resolve as ``home.qualname``.
    """
    for name in names:
        obj = namespace[name]
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            continue
        module = obj.__module__
        if module == home or not module.startswith(home + "."):
            continue
        if obj.__qualname__ != name:
            continue
        if isinstance(obj, type):
            _resolve_annotations(obj)
        obj.__module__ = home


def _resolve_annotations(cls: type) -> None:
    """Replace ``cls``'s own string annotations by the objects they name where written."""
    own = inspect.get_annotations(cls)
    if not own or not any(isinstance(value, str) for value in own.values()):
        return
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # one name unknown even where it was written: resolve the rest one by one
        hints = {}
        module_globals = vars(sys.modules[cls.__module__])
        for key, value in own.items():
            if isinstance(value, str):
                try:
                    hints[key] = eval(value, module_globals, dict(vars(cls)))
                except Exception:
                    continue  # stays a string, as unresolvable as it was
    cls.__annotations__ = {key: hints.get(key, value) for key, value in own.items()}
