"""The callers of a raising function, one or two levels up, found in the same release's source: where a raise's own
conditions name no knob, the conditions its callers call it under often do (``if spec.method == "eagle3":
self._check(...)``), and the arguments they hand it say what its parameters are to the launch (``inspect_model_cls(
self.draft_model_config.architectures, ...)``).

A call is linked to a function by its name (the last part of the function's qualified name; a class's name for its
``__init__``), where the call fits the function's parameters and the name is not defined in too many places to tell
(then only a ``self.`` call in the function's own file is taken). Names are not resolved through imports: the atlas
is built one file at a time, and this pass only joins what the files' passes found (templates.FileFacts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .templates import Call, Signature

MAX_CALLERS = 6  # call sites kept for a function, per level
MAX_UP = 3  # call sites kept for each caller, one level further up
MAX_DEFS_OF_NAME = 3  # a name defined in more places than this is linked only by a ``self.`` call in its own file


@dataclass(frozen=True)
class Caller:
    """A call site of a function: the caller, the conditions it calls under, what reaches their names, and what each
    of the function's parameters is bound to there; with the caller's own callers (``up``), one level further."""

    file: str
    function: str
    line: int
    way: tuple[tuple[str, bool], ...]
    reaching: tuple[tuple[str, str], ...]
    bindings: tuple[tuple[str, str], ...]  # (the callee's parameter, the argument's source in the caller)
    receiver: str = "self"  # how the call names the callee (templates.Call.receiver): "self" is the caller's self
    up: tuple[Caller, ...] = ()

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def link_callers(defs: dict[str, dict[str, Signature]], calls: dict[str, list[Call]],
                 wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], tuple[Caller, ...]]:
    """(file, function) -> its callers with theirs, for each function of ``wanted``: ``defs`` file -> qualified
    name -> parameters, ``calls`` file -> the calls it makes (both from templates.file_facts)."""
    by_name: dict[str, list[tuple[str, Call]]] = {}
    for file, made in calls.items():
        for call in made:
            by_name.setdefault(call.callee, []).append((file, call))
    defined: dict[str, int] = {}
    for names in defs.values():
        for qualified in names:
            short = _short(qualified)
            defined[short] = defined.get(short, 0) + 1

    def callers(file: str, function: str, limit: int, depth: int) -> tuple[Caller, ...]:
        signature = defs.get(file, {}).get(function)
        if signature is None:
            return ()
        short = _short(function)
        crowded = defined.get(short, 0) > MAX_DEFS_OF_NAME
        found: list[Caller] = []
        # a call under a condition, or handing on more than its own parameters' names, before a call that passes
        # its names through (whose callers, a level up, then say what they are)
        for at, call in sorted(by_name.get(short, ()), key=lambda c: (not c[1].way, _passes_through(c[1]))):
            if len(found) >= limit:
                break
            if crowded and (at != file or call.receiver != "self") or (at, call.function) == (file, function):
                continue
            bindings = bind(function, signature, call)
            if bindings is None:
                continue
            up = callers(at, call.function, MAX_UP, depth - 1) if depth > 1 else ()
            found.append(Caller(at, call.function, call.line, call.way, call.reaching, bindings, call.receiver, up))
        return tuple(found)

    return {(file, function): linked for file, function in wanted
            for linked in [callers(file, function, MAX_CALLERS, 2)] if linked}


def bind(function: str, signature: Signature, call: Call) -> tuple[tuple[str, str], ...] | None:
    """The function's parameters bound to the call's arguments; None where the call does not fit them (or cannot
    be a call of it: a method called by a bare name)."""
    params = list(signature.params)
    method = bool(params) and params[0] in ("self", "cls") and "." in function
    init = function.endswith(".__init__")
    if method:
        if not (call.receiver or init):
            return None
        params = params[1:]
    elif call.receiver == "self":
        return None
    if len(call.args) > len(params) and not signature.star:
        return None
    named = set(params) | set(signature.keyword_only)
    if any(k not in named for k, _ in call.keywords) and not signature.double_star:
        return None
    bound = list(zip(params, call.args)) + [(k, v) for k, v in call.keywords if k in named]
    return tuple(bound)


def _passes_through(call: Call) -> bool:
    return all(a.isidentifier() for a in [*call.args, *(v for _, v in call.keywords)])


def _short(function: str) -> str:
    """The name a function is called by: its own, or its class's for an ``__init__``."""
    parts = function.split(".")
    return parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]


def caller_row(caller: Caller) -> list[Any]:
    return [caller.file, caller.function, caller.line, [list(w) for w in caller.way],
            [list(r) for r in caller.reaching], [list(b) for b in caller.bindings], caller.receiver,
            [caller_row(u) for u in caller.up]]


def caller_of(row: list[Any]) -> Caller:
    file, function, line, way, reaching, bindings, receiver, up = row
    return Caller(file, function, line, tuple((c, bool(b)) for c, b in way), tuple((n, v) for n, v in reaching),
                  tuple((p, a) for p, a in bindings), receiver, tuple(caller_of(u) for u in up))


def call_row(call: Call) -> list[Any]:
    return [call.callee, call.function, call.line, call.receiver, list(call.args), [list(k) for k in call.keywords],
            [list(w) for w in call.way], [list(r) for r in call.reaching]]


def call_of(row: list[Any]) -> Call:
    callee, function, line, receiver, args, keywords, way, reaching = row
    return Call(callee, function, line, receiver, tuple(args), tuple((k, v) for k, v in keywords),
                tuple((c, bool(b)) for c, b in way), tuple((n, v) for n, v in reaching))


def signature_row(signature: Signature) -> list[Any]:
    return [list(signature.params), list(signature.keyword_only), signature.star, signature.double_star]


def signature_of(row: list[Any]) -> Signature:
    params, keyword_only, star, double_star = row
    return Signature(tuple(params), tuple(keyword_only), bool(star), bool(double_star))
