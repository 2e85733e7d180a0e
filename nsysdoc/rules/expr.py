"""A small, safe expression language for rule conditions.

Conditions are parsed with :mod:`ast` (``mode="eval"``) and evaluated by walking a whitelist of
node types; nothing is ever passed to ``eval``/``exec``. Allowed:

* numbers, strings, ``true``/``false``/``null`` (also ``True``/``False``/``None``);
* names of metric values and rule parameters;
* arithmetic ``+ - * / // % **`` on numbers only (``/`` by zero, overflow give null; ``**`` is
  computed in floating point so it cannot run away), unary ``-``/``+``;
* comparisons ``< <= > >= == !=`` (chains allowed), ``in``/``not in`` against a list literal;
* ``and``, ``or``, ``not``; ``a if cond else b``; list literals ``[a, b]``;
* calls of whitelisted functions: ``min``, ``max``, ``abs``, ``round``, ``coalesce(x, default)``,
  ``defined(x)`` (not null), ``matches(text, regex)``.

No attribute access, subscripts, comprehensions, lambdas or imports. Comparisons and arithmetic
with a null operand give null; ``and``/``or``/``not`` follow three-valued logic (``not null`` is
null, ``null and false`` is false, ``null or true`` is true), and a null condition is false, so a
missing value never makes a rule fire or a severity band match.
"""
from __future__ import annotations

import ast
import difflib
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable


class ExprError(ValueError):
    """A bad expression. ``name`` is the unknown identifier, if that was the problem."""

    def __init__(self, message: str, name: str | None = None, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


_CONSTS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


def _round(x, n=0):
    if x is None or n is None:
        return None
    if not isinstance(n, (int, float)) or isinstance(n, bool) or not abs(n) <= MAX_ROUND_DIGITS:
        # round(x, -10**9) would build 10**(10**9): over budget, the rule is reported broken
        raise ExprError(f"round(): the digits argument must be within -{MAX_ROUND_DIGITS}..{MAX_ROUND_DIGITS}")
    return round(x, int(n))


def _regex_match(text, pattern) -> bool | None:
    if text is None or pattern is None:
        return None
    if len(str(pattern)) > MAX_REGEX_CHARS:
        raise ExprError(f"matches(): pattern longer than {MAX_REGEX_CHARS} characters")
    from .. import safe_regex  # RE2: linear time, so no pattern can hang a report

    try:
        return safe_regex.compile(str(pattern)).search(str(text)[:MAX_TEXT_CHARS]) is not None
    except safe_regex.PatternError as exc:
        raise ExprError(f"matches(): bad regular expression {str(pattern)[:40]!r}: {exc}") from None


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": lambda *a: None if any(x is None for x in a) else min(a),
    "max": lambda *a: None if any(x is None for x in a) else max(a),
    "abs": lambda x: None if x is None else abs(x),
    "round": lambda x, n=0: _round(x, n),
    "coalesce": lambda *a: next((x for x in a if x is not None), None),
    "defined": lambda x: x is not None,
    "matches": _regex_match,
}
_ARITY = {"min": (1, 8), "max": (1, 8), "abs": (1, 1), "round": (1, 2), "coalesce": (1, 8),
          "defined": (1, 1), "matches": (2, 2)}


@dataclass(frozen=True)
class Expr:
    """A checked expression: ``source`` text, parsed tree, the names it uses, and those it only
    uses inside ``defined()``/``coalesce()`` (which handle a missing value themselves)."""

    source: str
    tree: ast.expr
    names: frozenset[str]
    guarded: frozenset[str] = frozenset()

    def evaluate(self, env: dict[str, Any]) -> Any:
        return _eval(self.tree, env)


def compile_expr(source: str, known: set[str] | None = None) -> Expr:
    """Parse and check ``source``. With ``known``, unknown names raise :class:`ExprError` with a
    suggestion of the closest known name."""
    if isinstance(source, bool):
        source = "true" if source else "false"
    if not isinstance(source, (str, int, float)):
        raise ExprError(f"expected an expression, got {type(source).__name__}")
    text = str(source)
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"syntax error in {_short(text)}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nested deeper than {MAX_EXPR_DEPTH} levels") from None
    depth, stack = 0, [(tree, 1)]
    while stack:  # iterative: a deep tree must not overflow the checker's own stack
        node, d = stack.pop()
        depth = max(depth, d)
        if depth > MAX_EXPR_DEPTH:
            raise ExprError(f"expression nested deeper than {MAX_EXPR_DEPTH} levels")
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    names: set[str] = set()
    _check(tree, names)
    unguarded: set[str] = set()
    _collect_unguarded(tree, unguarded)
    if known is not None:
        for name in sorted(names):
            if name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ExprError(f"unknown name {name!r} in {_short(text)}{hint}", name, close[0] if close else None)
    return Expr(text, tree, frozenset(names), frozenset(names - unguarded))


def _collect_unguarded(node: ast.AST, out: set[str]) -> None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("defined", "coalesce"):
        return
    if isinstance(node, ast.Name) and node.id not in _CONSTS:
        out.add(node.id)
    for child in ast.iter_child_nodes(node):
        _collect_unguarded(child, out)


def _check(node: ast.AST, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, float, str, bool, type(None))):
            raise ExprError(f"constant {_short(node.value, 40)} is not allowed")
    elif isinstance(node, ast.Name):
        if node.id not in _CONSTS:
            names.add(node.id)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, names)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        _check(node.left, names)
        _check(node.right, names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        _check(node.operand, names)
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _CMPOPS and not isinstance(op, (ast.In, ast.NotIn)):
                raise ExprError(f"comparison {type(op).__name__} is not allowed")
        _check(node.left, names)
        for c in node.comparators:
            _check(c, names)
    elif isinstance(node, ast.IfExp):
        _check(node.test, names)
        _check(node.body, names)
        _check(node.orelse, names)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            _check(e, names)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            close = difflib.get_close_matches(what, sorted(FUNCTIONS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ExprError(f"function {what!r} is not allowed (allowed: {', '.join(sorted(FUNCTIONS))}){hint}",
                            what, close[0] if close else None)
        if node.keywords:
            raise ExprError("keyword arguments are not allowed")
        lo, hi = _ARITY[node.func.id]
        if not lo <= len(node.args) <= hi:
            raise ExprError(f"{node.func.id}() takes {lo}..{hi} arguments, got {len(node.args)}")
        for a in node.args:
            _check(a, names)
    else:
        raise ExprError(f"{type(node).__name__} is not allowed in rule expressions")


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _CONSTS:
            return _CONSTS[node.id]
        return env.get(node.id)
    if isinstance(node, ast.BoolOp):
        # three-valued logic (as SQL): a missing value never makes a condition true by accident
        vals = [_eval(v, env) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v is not None and not v for v in vals):
                return False
            return None if any(v is None for v in vals) else True
        if any(v is not None and v for v in vals):
            return True
        return None if any(v is None for v in vals) else False
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env)
        if val is None:
            return None
        if isinstance(node.op, ast.Not):
            return not val
        _number(val, node)
        return -val if isinstance(node.op, ast.USub) else +val
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if left is None or right is None:
            return None
        _number(left, node)
        _number(right, node)
        try:
            if isinstance(node.op, ast.Pow):  # in floating point: 9 ** 9 ** 9 must not hang
                out = math.pow(float(left), float(right))
            else:
                out = _BINOPS[type(node.op)](left, right)
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        if isinstance(out, int) and not isinstance(out, bool) and out.bit_length() > MAX_INT_BITS:
            out = float(out) if out.bit_length() < 1024 else None
        if isinstance(out, float) and (math.isnan(out) or math.isinf(out)):
            return None
        return out
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if isinstance(op, (ast.In, ast.NotIn)):
                if right is None:
                    return None
                res = left in right
                res = res if isinstance(op, ast.In) else not res
            else:
                if left is None or right is None:
                    return None
                try:
                    res = _CMPOPS[type(op)](left, right)
                except TypeError as exc:
                    raise ExprError(f"cannot compare in {_short(ast.unparse(node))}: {str(exc)[:80]}") from None
            if not res:
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _truthy(_eval(node.test, env)) else _eval(node.orelse, env)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*[_eval(a, env) for a in node.args])
    raise ExprError(f"{type(node).__name__} is not allowed")  # pragma: no cover - rejected by _check


def _number(value: Any, node: ast.AST) -> None:
    """Arithmetic is on numbers only (no string or list repetition that could exhaust memory)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError(f"arithmetic on a non-number in {_short(ast.unparse(node))}: {_short(value, 40)}")


#: ``round(x, n)`` clamps ``n`` to +-this (``round(x, -10**9)`` would compute 10**(10**9)).
MAX_ROUND_DIGITS = 30
#: Longest expression source and deepest nesting a rule may use (real rules: < 300 chars, depth < 10).
MAX_EXPR_CHARS = 2000
MAX_EXPR_DEPTH = 40
#: Integers beyond this many bits become floats (no arithmetic on ever-growing integers).
MAX_INT_BITS = 256
#: Longest pattern and text ``matches()`` accepts (regexes come from rule files; keep them small).
MAX_REGEX_CHARS = 200
MAX_TEXT_CHARS = 4096


def _short(text: str, n: int = 60) -> str:
    r = repr(text)
    return r if len(r) <= n else r[: n - 3] + "..."


def _truthy(value: Any) -> bool:
    return bool(value) if value is not None else False
