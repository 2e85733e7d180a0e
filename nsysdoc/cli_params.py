"""Option values converted without pydantic: the command line starts 0.2-0.4 s sooner.

Typer 0.29 converts every option value through a pydantic ``TypeAdapter``, so each command pays
pydantic's import (0.15-0.45 s on our machines) and one adapter per option before doing any work:
a tenth of a warm report of a 2,000-step capture. Every option of nsysdoc is a plain ``str``,
``bool``, ``Path``, ``int``, ``float`` or ``Enum`` choice (or a list or ``Optional`` of one), which typer's
own pydantic-free helpers (``coerce_cli_path``, ``coerce_cli_choice``) convert as its adapters
would. :func:`install` routes those options there.

What cannot change behaviour:

* any parameter of another shape, or with a parser, a file type or ``clamp``, is left to typer's
  adapter;
* a value the light path does not accept (a bad choice, ``--jobs x``, a path that fails a check)
  is converted again by typer's own adapter, which raises its usual error: messages are typer's,
  word for word;
* if typer's internals are not the ones this was written against (another version), nothing is
  installed.

tests/test_cli_params.py converts sample values of every option of every command both ways and
compares results and error messages.
"""
from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable

_INT = re.compile(r"-?[0-9]{1,18}\Z")  # what int() and pydantic read alike (no "+", "_", spaces)
_FLOAT = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?\Z")

_installed = False


def _unoptional(ann: Any) -> Any:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _leaf(ann: Any, info: Any, pt: Any) -> Callable | None:
    """The converter of one value of annotation ``ann``, or None when typer's adapter must do it."""
    if getattr(info, "parser", None) is not None:
        return None
    if ann is str:
        return lambda v, param, ctx: v if type(v) is str else _no(v)
    if ann is bool:  # a flag's value is already a bool
        return lambda v, param, ctx: v if type(v) is bool else _no(v)
    if isinstance(ann, type) and issubclass(ann, Enum):
        choices = tuple(ann)
        sensitive = info.case_sensitive
        return lambda v, param, ctx: pt.coerce_cli_choice(v, choices=choices, case_sensitive=sensitive, ctx=ctx)
    if ann in (int, float):
        if getattr(info, "clamp", False):
            return None
        lo, hi = info.min, info.max
        pattern = _INT if ann is int else _FLOAT
        plain = (int,) if ann is int else (int, float)  # pydantic turns an int into a float too

        def number(v, param, ctx):
            x = ann(v) if (type(v) is str and pattern.match(v)) or type(v) in plain else _no(v)
            if (lo is not None and not x >= lo) or (hi is not None and not x <= hi):
                _no(v)  # out of bounds: typer's adapter words the error
            return x
        return number
    if isinstance(ann, type) and issubclass(ann, Path) and pt.routes_to_path(ann, info):
        path_type = info.path_type if info.path_type is not None else ann
        if not (isinstance(path_type, type) and issubclass(path_type, Path)):
            return None

        def path(v, param, ctx):
            # what pydantic's Path validation does with a command-line string (coerce_cli_path
            # would import pydantic for it); the empty string and NUL are left to pydantic
            if type(v) is str and v and "\x00" not in v:
                v = path_type(v)
            elif not isinstance(v, path_type):
                _no(v)
            return pt.coerce_cli_path(v, info, path_type=path_type, param=param, ctx=ctx)
        return path
    return None


def _no(v: Any):
    raise ValueError(v)  # not for the light path: typer's adapter decides


def install() -> bool:
    """Route nsysdoc's plain options around pydantic (see the module). True when installed."""
    global _installed
    if _installed:
        return True
    try:
        import typer.core as core
        from typer import _coercion as co
        from typer import _param_types as pt

        original = core.build_runtime_param
        base = co.RuntimeParam
        for name in ("coerce_cli_choice", "coerce_cli_path", "routes_to_path"):
            getattr(pt, name)
        if original is not co.build_runtime_param:
            return False  # somebody else patched it: leave it alone
    except (ImportError, AttributeError):
        return False

    @dataclass(frozen=True)
    class LightParam(base):  # type: ignore[misc, valid-type]
        """One option's conversion without pydantic; anything it does not accept goes to typer."""

        convert: Callable = None  # type: ignore[assignment]
        many: bool = False
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if self.many:
                    if not isinstance(value, (list, tuple)):
                        value = [value]
                    return [self.convert(v, param, ctx) for v in value]
                return self.convert(value, param, ctx)
            except Exception:
                # typer's own conversion: its result, or its error message, word for word
                return original(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any):
        try:
            if descriptor.file_annotation is None:
                ann = _unoptional(descriptor.annotation)
                many = typing.get_origin(ann) is list
                if many:
                    (ann,) = typing.get_args(ann)
                convert = _leaf(ann, descriptor.parameter_info, pt)
                if convert is not None:
                    return LightParam(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info,
                                      convert=convert, many=many, descriptor=descriptor)
        except Exception:
            pass
        return original(descriptor)

    build.original = original  # type: ignore[attr-defined]
    core.build_runtime_param = build
    _installed = True
    return True
