"""The fix of a located raise, from the conditions on the way to it: which flag, config key or environment variable
to change, and to what.

A template carries the conditions its function tests on the way to the raise (``Template.way``, outermost first) and
what reaches the names they read (``Template.reaching``: ``multiple_of = max(u, tp)``, ``spec =
self.speculative_config``, a module's ``SUPPORTED = frozenset({...})``). Each condition is read with what reaches
its names put in their place, so that a knob is found where the function renamed it. The raise happened, so every
condition on the way held; any one of them made false avoids it. Two forms of fix:

- a condition that compares a knob with a value (``nst > n_predict``, ``backend not in SUPPORTED``, ``not
  envs.VLLM_X``): the other side of it (templates.remedies_of), the value worked out by the player on the numbers the
  message printed, a module's literal set written out;
- a knob whose number the message printed, under a condition no one comparison turns round (``nst % n_predict !=
  0``, ``max(u, tp) % u != 0``): the values nearest the printed one that make a condition on the way false, each
  condition played by the player with every other printed number as printed. A number the message says is a knob's
  expression ("{u} (num_speculative_tokens + 1)") is solved through that expression.

Where the raise's own conditions name no knob, its callers' (callers.py, one or two levels up) are read the same
way: the raise's conditions and the message's holes with each parameter put as the caller's argument, under the
conditions the caller calls it under, in the caller's function; and where no condition there names a knob either,
a value the message printed that the caller hands down from a knob (``architectures`` from
``getattr(model_config.hf_config, "architectures", [])``) is that knob's, to be changed from what was printed.

The player (``play/``) is the one evaluator: nothing here computes a condition itself.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Sequence
from typing import Any

from ..play.player import Player, dotted
from ..play.values import Raised, Unknown
from .atlas import CUT
from .callers import Caller
from .knobs import advised_knobs, knob_of, said_knobs
from .templates import Template, remedies_of

# What remedies_of words a value with, before the expression itself ("at most n_predict").
_WORDED = re.compile(r"^(?P<word>at most |below |at least |above |other than |none of |one of )?(?P<expression>.+)$")
_NUMBER = re.compile(r"-?\d{1,18}")
# A hole the message's own words say is a knob's expression: "{u} (num_speculative_tokens + 1)".
_SAID_EXPRESSION = re.compile(r"^\s*\((?P<expression>[A-Za-z_][\w.]*(?:\s*[-+*]\s*\d+)?)\)")
SEARCH_SPAN = 64  # values of a knob tried on each side of the printed one
SEARCH_LIMIT = 4096  # a knob whose expression printed more than this is not solved back to its value
MAX_SOLVED_KNOBS = 3  # knobs solved for a template: each costs up to 2 * SEARCH_SPAN plays of its conditions
MAX_SHOWN_ITEMS = 24  # a literal set written out up to this many items
MAX_EXPANDED_NODES = 2000  # the nodes what reaches a condition's names may add to it


def fixes_of(template: Template, holes: Sequence[tuple[str, str]], fields: dict[str, frozenset[str]]) -> list[str]:
    """The fixes of the conditions on the way to ``template``'s raise, with the values the message printed
    (``holes``): the guard's own remedies and the values solved for first; a condition further out (which mostly
    chooses a way: ``if self.model is not None``) only where those give none, except an environment variable's, a
    switch that is there to be set (``if not envs.VLLM_USE_V1``). The guard's remedies alone where the template
    carries no way (an older atlas's)."""
    values = dict(holes)
    reaching = _reaching(template)
    numbers = _numbers(values, reaching)
    way = [(tree, branch) for text, branch in getattr(template, "way", ()) for tree in [_parse(text)] if tree is not None]
    if not way:
        return [_worded(knob, value, values, numbers, reaching, name)
                for name, value in template.remedies for knob in [knob_of(name, template.function, fields)] if knob]
    pairs = [(depth, knob, value, name) for depth, (condition, branch) in enumerate(reversed(way))
             for name, value in remedies_of(condition, branch)
             for knob in _knobs(name, template.function, fields, reaching) if not _stops_speculation(knob, value)]
    turned = [(depth, knob, _worded(knob, value, values, numbers, reaching, name))
              for depth, knob, value, name in _grouped(pairs)]
    said = {f.partition(" (")[0] for depth, _, f in turned if depth == 0}
    solved = [f for f in _solved(template, way, values, numbers, reaching, fields)
              if not any(s.startswith(f.partition(" (")[0].partition(": ")[0] + ": ") and s.endswith(
                  " = " + f.partition(" (")[0].partition(": ")[2]) for s in said)]  # not a value the guard worked out
    first = [f for depth, _, f in turned if depth == 0] + solved
    further = [f for depth, knob, f in turned if depth > 0 and (not first or knob.startswith("the environment variable"))]
    return list(dict.fromkeys([*first, *further]))


def caller_fixes(template: Template, holes: Sequence[tuple[str, str]], fields: dict[str, frozenset[str]],
                 callers: Sequence[Caller]) -> list[str]:
    """The fixes the callers of ``template``'s function give (``fixes_of`` on the raise as each caller sees it), each
    saying where the call is; the nearer callers' first."""
    found: list[str] = []
    for caller in callers:
        seen = _as_called(template, holes, caller)
        if seen is None:
            continue
        near, printed = seen
        found += [f"{fix} [{_via(caller)}]" for fix in _caller_own(near, printed, fields)]
        for up in caller.up:
            further = _as_called(near, printed, up)
            if further is not None:
                found += [f"{fix} [{_via(caller)}, {_via(up)}]" for fix in _caller_own(*further, fields)]
    return list(dict.fromkeys(found))


def _via(caller: Caller) -> str:
    return f"called by {caller.function} at {caller.location}"


def _caller_own(template: Template, holes: list[tuple[str, str]], fields: dict[str, frozenset[str]]) -> list[str]:
    """The fixes of the conditions on the way in the caller; else the knobs the caller hands the printed values
    down from."""
    fixes = fixes_of(template, holes, fields)
    if fixes:
        return fixes
    reaching = _reaching(template)
    return [f"{knob}: other than {value} (the message printed it; no condition on the way names a knob)"
            for hole, value in holes if value.strip() and value != CUT
            for knob in _knobs(hole, template.function, fields, reaching)]


def _as_called(template: Template, holes: Sequence[tuple[str, str]], caller: Caller) -> \
        tuple[Template, list[tuple[str, str]]] | None:
    """The raise as ``caller`` makes it: its conditions and holes, read through what reaches their names in the
    function, with each parameter put as the caller's argument, under the caller's own conditions; in the caller's
    function. What reads the callee's ``self`` is left out where the call is not made on the caller's own."""
    bound = {param: tree for param, text in caller.bindings for tree in [_parse(text)] if tree is not None}
    reaching = _reaching(template)

    def moved(text: str) -> str | None:
        tree = _parse(text)
        if tree is None:
            return None
        tree = _expand(tree, reaching)
        if caller.receiver != "self" and any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(tree)):
            return None  # the callee's self, which is not the caller's
        return ast.unparse(_substituted(tree, bound))

    own = [(text, branch) for condition, branch in getattr(template, "way", ()) for text in [moved(condition)] if text]
    renamed = [(text, value) for hole, value in holes for text in [moved(hole)] if text]
    if not own and not renamed and not caller.way:
        return None
    names = dict(zip(template.parts[1::2], (moved(h) or h for h in template.parts[1::2])))
    parts = tuple(names.get(part, part) if i % 2 else part for i, part in enumerate(template.parts))
    return Template(template.kind, template.exception, caller.function, caller.line, parts, "", (),
                    (*caller.way, *own), caller.reaching), renamed


def _substituted(tree: ast.expr, bound: dict[str, ast.expr]) -> ast.expr:
    """The expression with each parameter's name put as the argument bound to it."""
    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if isinstance(node.ctx, ast.Load) and node.id in bound:
                return copy.deepcopy(bound[node.id])
            return node

    return ast.fix_missing_locations(Put().visit(copy.deepcopy(tree)))


# Flags whose removal turns speculative decoding off: what a condition on the way says, and no fix of a speculative
# launch's failure.
_SPECULATION = ("--speculative-config", "--speculative-algorithm", "--speculative-model", "--speculative-draft-model-path")


def _stops_speculation(knob: str, value: str) -> bool:
    return knob in _SPECULATION and value.startswith("unset")


def _grouped(pairs: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
    """A knob that the way's ``elif`` chain compares with several values (``method == "medusa"``, ``method ==
    "suffix"``, each false on the way to the ``else``) as one remedy, where the first of them was: one of them."""
    literal: dict[str, list[str]] = {}
    for _, knob, value, _ in pairs:
        tree = _parse(value)
        if isinstance(tree, ast.Constant) and isinstance(tree.value, str | int):
            literal.setdefault(knob, []).append(value)
    out, done = [], set()
    for depth, knob, value, name in pairs:
        values = literal.get(knob, [])
        if len(values) < 2 or value not in values:
            out.append((depth, knob, value, name))
        elif knob not in done:
            done.add(knob)
            out.append((depth, knob, "one of " + ", ".join(dict.fromkeys(reversed(values))), name))  # in source order
    return out


def said_fixes(template: Template, fields: dict[str, frozenset[str]]) -> list[str]:
    """The knobs the message's own words tell to change ("Set VLLM_USE_V1=0", "adjust num_speculative_tokens"),
    for a message whose conditions read none."""
    literal = " ".join(template.parts[0::2])
    return [f"{knob}: {value or 'as the message says'} (the message names it)"
            for knob, value in said_knobs(literal, fields)]


def advised_fixes(template: Template, fields: dict[str, frozenset[str]]) -> list[str]:
    """The knobs the message's own words advise changing ("Increase max_num_batched_tokens ..."), offered beside the
    conditions' fixes: from the template, so that a paste that cut the advice off still gets it."""
    literal = " ".join(template.parts[0::2])
    return [f"{knob}: {value or 'as the message advises'} (the message advises it)"
            for knob, value in advised_knobs(literal, fields)]


def _worded(knob: str, value: str, holes: dict[str, str], numbers: dict[str, Any], reaching: dict[str, ast.expr],
            name: str = "") -> str:
    """The fix in words, with the values the message printed for the name and for what the value reads."""
    shown = [f"{hole} is {holes[hole]}" for hole in holes
             if hole == name or re.search(rf"(?<![\w.]){re.escape(hole)}(?![\w(])", value)]
    worked = _worked(value, numbers, reaching)
    return f"{knob}: {value}" + (f" = {worked}" if worked is not None else "") + \
        (f" ({', '.join(shown)} here)" if shown else "")


def _knobs(name: str, function: str, fields: dict[str, frozenset[str]], reaching: dict[str, ast.expr]) -> list[str]:
    """The knobs ``name`` is: itself, else what reaches it (each side of an ``or``: ``backend or
    envs.VLLM_ATTENTION_BACKEND``)."""
    knob = knob_of(name, function, fields)
    if knob is not None:
        return [knob]
    tree = _parse(name)
    if tree is None:
        return []
    expanded = _expand(tree, reaching)
    sides = expanded.values if isinstance(expanded, ast.BoolOp) and isinstance(expanded.op, ast.Or) else [expanded]
    found = [knob_of(text, function, fields) for side in sides for text in [dotted(side) or _env_read(side)] if text]
    return [k for k in dict.fromkeys(found) if k]


def _env_read(node: ast.expr) -> str | None:
    """``os.getenv("X")`` and ``os.environ.get("X", d)`` as knobs.knob_of reads them."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.getenv", "os.environ.get") and node.args:
        return ast.unparse(node)
    return None


def _computed(value: str, holes: dict[str, str]) -> int | None:
    """The remedy's expression worked out on the numbers the message printed, where it comes to a whole number."""
    worked = _worked(value, _numbers(holes, {}), {})
    return int(worked) if worked is not None and _NUMBER.fullmatch(worked) else None


def _worked(value: str, numbers: dict[str, Any], reaching: dict[str, ast.expr]) -> str | None:
    """The remedy's expression worked out by the player on the numbers the message printed and the literals that
    reach it ("self.speculative_num_steps + 1" with the step count printed as 5: 6; "SUPPORTED": its items); None
    where it comes to no whole number or literal set, or is one already."""
    expression = _WORDED.match(value)
    tree = _parse(expression["expression"]) if expression else None
    if tree is None or isinstance(tree, ast.Constant) or _literal_items(tree) is not None:
        return None
    worked = _play(_expand(tree, reaching), numbers)
    if type(worked) is int:
        return str(worked)
    items = _items(worked)
    return items if items is not None and not isinstance(tree, ast.List | ast.Tuple | ast.Set) else None


def _items(value: Any) -> str | None:
    """A set of plain values as the release spells them, sorted where the set has no order; None for anything else."""
    if isinstance(value, set | frozenset) and all(isinstance(v, str | int) for v in value) and \
            len(value) <= MAX_SHOWN_ITEMS:
        return repr(sorted(value, key=lambda v: (isinstance(v, str), v)))
    if isinstance(value, list | tuple) and all(isinstance(v, str | int) for v in value) and len(value) <= MAX_SHOWN_ITEMS:
        return repr(list(value))
    if isinstance(value, dict) and all(isinstance(k, str | int) for k in value) and len(value) <= MAX_SHOWN_ITEMS:
        return repr(list(value))
    return None


def _literal_items(tree: ast.expr) -> list | None:
    try:
        value = ast.literal_eval(tree)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return list(value) if isinstance(value, list | tuple | set | frozenset | dict) else None


def _solved(template: Template, way: list[tuple[ast.expr, bool]], holes: dict[str, str], numbers: dict[str, Any],
            reaching: dict[str, ast.expr], fields: dict[str, frozenset[str]]) -> list[str]:
    """For each knob whose number the message printed: the values nearest the printed one, below and above, that
    make a condition on the way false, where the conditions the player can decide on the printed numbers hold on
    them (as they did: the engine raised)."""
    conditions = [(_expand(tree, reaching), branch) for tree, branch in way]
    held = [i for i, (tree, branch) in enumerate(conditions) if _holds(tree, branch, numbers) is True]
    if not held or any(_holds(tree, branch, numbers) is False for tree, branch in conditions):
        return []  # the printed numbers do not raise here: not the way the message came
    fixes = []
    knobs = _printed_knobs(template, conditions, holes, numbers, reaching, fields)
    for _, (knob, bind, now) in zip(range(MAX_SOLVED_KNOBS), knobs):
        near: list[int] = []
        for side in (range(now - 1, max(now - SEARCH_SPAN, -1), -1), range(now + 1, now + SEARCH_SPAN)):
            for value in side:
                trial = {**numbers, **bind(value)}
                if any(_holds(tree, branch, trial) is False for tree, branch in conditions):
                    near.append(value)
                    break
        if near:
            fixes.append(f"{knob}: {' or '.join(map(str, sorted(near)))} (the nearest to {now} on which the conditions "
                         f"on the way do not all hold)")
    return fixes


def _printed_knobs(template: Template, conditions: list[tuple[ast.expr, bool]], holes: dict[str, str],
                   numbers: dict[str, Any], reaching: dict[str, ast.expr], fields: dict[str, frozenset[str]]):
    """(knob, the bindings a value of it makes, its printed value) for each knob the conditions read whose value the
    message printed: a hole the message says is a knob's expression first, then a name of the conditions that is a
    knob."""
    read = {name for tree, _ in conditions for node in ast.walk(tree) if isinstance(node, ast.expr)
            for name in [dotted(node)] if name}
    seen = set()
    parts = template.parts
    for i, hole in enumerate(parts[1::2]):
        said = _SAID_EXPRESSION.match(parts[2 * i + 2])
        expression = _parse(said["expression"]) if said else None
        printed = numbers.get(hole)
        if expression is None or type(printed) is not int or hole not in read:
            continue
        names = [n for n in (dotted(node) for node in ast.walk(expression) if isinstance(node, ast.expr)) if n]
        knobs = [k for n in names[:1] for k, _ in said_knobs(n, fields)]
        if not knobs or knobs[0] in seen:
            continue
        seen.add(knobs[0])

        def bind(value: int, name: str = names[0], hole: str = hole, expression: ast.expr = expression) -> dict[str, Any]:
            return {hole: _play(expression, {name: value})}

        now = next((v for v in range(-2, min(printed, SEARCH_LIMIT) + 3) if bind(v)[hole] == printed), None)
        if now is not None:
            yield knobs[0], bind, now
    order = list(numbers)  # the holes' order in the message, each hole's name before what reached it
    for name in sorted(read & set(order), key=order.index):
        now = numbers.get(name)
        knob = knob_of(name, template.function, fields) if type(now) is int else None
        if knob is not None and knob not in seen:
            seen.add(knob)
            yield knob, (lambda value, name=name: {name: value}), now


def _holds(tree: ast.expr, branch: bool, numbers: dict[str, Any]) -> bool | None:
    """Whether the condition is as it was on the way to the raise (true in an ``if``'s body, false in its ``else``
    and for an assert); None where the player cannot tell."""
    value = _play(tree, numbers)
    if isinstance(value, Unknown) or not isinstance(value, bool | int):
        return None
    return bool(value) == branch


def _play(tree: ast.expr, numbers: dict[str, Any]) -> Any:
    try:
        return Player("", {}).evaluate(tree, dict(numbers))
    except (Raised, ValueError, TypeError, RecursionError):  # `n // 0`: the condition says nothing then
        return None


def _reaching(template: Template) -> dict[str, ast.expr]:
    return {name: tree for name, text in getattr(template, "reaching", ()) for tree in [_parse(text)] if tree is not None}


def _numbers(holes: dict[str, str], reaching: dict[str, ast.expr]) -> dict[str, Any]:
    """The whole numbers the message printed, under each hole's name and what reaches it (a hole ``n_predict``
    whose value came from ``self.draft_model_config.hf_config.n_predict``, under both)."""
    numbers: dict[str, Any] = {}
    for name, text in holes.items():
        if not _NUMBER.fullmatch(text.strip()):
            continue
        numbers[name] = int(text)
        tree = _parse(name)
        expanded = dotted(_expand(tree, reaching)) if tree is not None else None
        if expanded:
            numbers.setdefault(expanded, int(text))
    return numbers


def _expand(tree: ast.expr, reaching: dict[str, ast.expr], depth: int = 3) -> ast.expr:
    """The expression with what reaches its names in their place, a few steps deep; ``getattr(x, "k", d)`` read as
    ``x.k``."""
    budget = [MAX_EXPANDED_NODES]

    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if depth > 0 and isinstance(node.ctx, ast.Load) and node.id in reaching:
                put = _expand(copy.deepcopy(reaching[node.id]), reaching, depth - 1)
                budget[0] -= sum(1 for _ in ast.walk(put))
                if budget[0] >= 0:  # what a hostile tree's names reach may not grow without bound
                    return put
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and \
                    node.args[1].value.isidentifier():
                return ast.Attribute(node.args[0], node.args[1].value, ast.Load())
            return node

    return ast.fix_missing_locations(Put().visit(copy.deepcopy(tree)))


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
