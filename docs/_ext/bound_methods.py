"""A griffe extension: document methods bound from a function of another module.

pride binds some methods of a class from module-level functions that take the
object first, so a long surface can live in modules of one idea each
(``connect = connecting.connect`` on Branch, ``flow = flows.flow`` on
Session). Python binds such a function like any method; griffe's static
analysis sees only a class attribute without a docstring, which the API
reference would leave out. This extension turns each such attribute into the
method it is: the function's signature without its first parameter, its
docstring and its labels (``async``), under the class's own path, so
``[flow][pride.supervisors.session.Session.flow]`` resolves.
"""

from __future__ import annotations

from typing import Any

import griffe


class BoundMethods(griffe.Extension):
    """Replace ``name = module.function`` class attributes by the methods they bind."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            for name, member in list(cls.members.items()):
                if member.is_alias or not member.is_attribute or member.docstring is not None:
                    continue
                target = _bound_function(member, loader)
                if target is not None:
                    cls.set_member(name, _as_method(name, target, cls))


def _classes(module: griffe.Module) -> list[griffe.Class]:
    found: list[griffe.Class] = []
    stack: list[griffe.Object] = [module]
    while stack:
        obj = stack.pop()
        for member in obj.members.values():
            if member.is_alias:
                continue
            if member.is_class:
                found.append(member)  # type: ignore[arg-type]
            if member.is_module or member.is_class:
                stack.append(member)  # type: ignore[arg-type]
    return found


def _bound_function(attribute: Any, loader: griffe.GriffeLoader) -> griffe.Function | None:
    value = attribute.value
    if not isinstance(value, griffe.ExprAttribute | griffe.ExprName):
        return None
    try:
        target = loader.modules_collection.get_member(value.canonical_path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    if target.is_alias:
        try:
            target = target.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
    if not target.is_function or not list(target.parameters):
        return None
    return target  # type: ignore[no-any-return]


def _as_method(name: str, function: griffe.Function, cls: griffe.Class) -> griffe.Function:
    method = griffe.Function(
        name,
        lineno=function.lineno,
        endlineno=function.endlineno,
        parameters=griffe.Parameters(*list(function.parameters)[1:]),
        returns=function.returns,
        decorators=function.decorators,
        parent=cls,
    )
    method.labels |= function.labels
    if function.docstring is not None:
        method.docstring = griffe.Docstring(
            function.docstring.value,
            lineno=function.docstring.lineno,
            endlineno=function.docstring.endlineno,
            parent=method,
        )
    return method
