"""Shapes of code: where each gate kind occurs in an engine file, found with libcst matchers.

A matcher turns the functions of a file that contain a rule's needles into Sites: the code, the
exception and message the engine raises there, and the facts of the shape (a list and its
semantics, a class-name dispatch, a call). Sites do not depend on the target, so they are cached by
file content; this module (and libcst) is only imported when a file's sites are not cached yet.

Files are not parsed whole by libcst (seconds on the largest engine files): a cheap :mod:`ast` pass
picks the functions that contain a rule's needles, and only those are parsed, with their positions
shifted back to the file's lines.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import libcst as cst
import libcst.matchers as m
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from ..core.types import Rule, Site
from .facts import ModuleInfo
from .gates import (
    ArgumentGate,
    Candidate,
    ConfigAttributeDispatch,
    DraftClassCheck,
    InterfaceCheck,
    Kind,
    ModelTypeAllowlist,
    RegistryLookup,
    RequiredMethod,
)

MAX_EXCERPT_LINES = 16


@dataclass
class Segment:
    """A function of a file, parsed by libcst on its own; ``offset`` maps its lines back to the file."""

    module: cst.Module
    positions: _Positions
    offset: int
    info: ModuleInfo  # the file's module-level facts: literals a gate names
    path: str
    local_lists: dict[str, list[str]]  # string lists bound earlier in the enclosing function
    code: str  # the text parsed: what ``module.code`` would write out again
    # What a shape derives from the segment, shared by the copies of it that each rule gets (segments).
    derived: dict[str, Any] = field(default_factory=dict)

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line + self.offset

    def end_line(self, node: cst.CSTNode) -> int:
        return self.positions[node].end.line + self.offset

    def excerpt(self, node: cst.CSTNode) -> str:
        """The node's source lines as the file has them (from its first line, without leading comments)."""
        start = self.positions[node].start
        lines = self.code.splitlines()[start.line - 1: self.positions[node].end.line]
        if len(lines) > MAX_EXCERPT_LINES:
            lines = lines[:MAX_EXCERPT_LINES] + [" " * start.column + "..."]
        return "\n".join(x[start.column:] if x[:start.column].isspace() else x.lstrip() for x in lines)


def find_sites(tree: ast.Module, source: str, info: ModuleInfo, path: str, rules: tuple[Rule, ...]) -> dict[str, list[Site]]:
    """The sites of each rule's shape in one file. A statement several rules anchor on is parsed once."""
    found = {}
    parsed: dict[tuple[int, int], Segment | None] = {}
    for rule in rules:
        shape = SHAPES[rule.kind]
        functions = shape.function_names(rule) if shape.whole_functions else None
        found[rule.id] = [site for segment in segments(tree, source, shape.needles(rule), info, path,
                                                        shape.whole_functions, parsed, functions)
                          for site in shape.find(rule, segment)]
    return found


def segments(tree: ast.Module, source: str, needles: list[str], info: ModuleInfo, path: str,
             whole_functions: bool = False, parsed: dict | None = None,
             names: frozenset[str] | None = None) -> Iterator[Segment]:
    """The statements of ``source`` that can be gates, each parsed by libcst on its own.

    A gate is an ``if`` or ``assert`` whose test, or a ``raise`` whose text, contains a needle; the
    outermost such statement is taken (a whole if/elif chain), with the string lists its function
    binds before it, which an ``if`` may name. ``names``: the only functions worth parsing whole (None: any).
    """
    lines = source.splitlines(keepends=True)
    parsed = {} if parsed is None else parsed
    for node, local_lists in _anchors(tree, lines, needles, whole_functions, names):
        key = (node.lineno, node.end_lineno)
        if key not in parsed:
            parsed[key] = _parse_segment(lines, node, info, path)
        if parsed[key] is not None:
            yield replace(parsed[key], local_lists=local_lists)


def _parse_segment(lines: list[str], node: ast.stmt, info: ModuleInfo, path: str) -> Segment | None:
    text = "".join(lines[node.lineno - 1: node.end_lineno])
    indented = bool(text[:1].isspace())
    # An indented statement parses inside `if 1:`, which accepts any block indentation.
    code = ("if 1:\n" + text) if indented else text
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    return Segment(module, _Positions(module), node.lineno - 1 - int(indented), info, path, {}, code)


class _Positions:
    """A segment's node positions, resolved on first use: resolving them writes the whole segment out again, and most
    segments parsed (whole functions that name a needle) hold no site."""

    def __init__(self, module: cst.Module):
        self._module = module
        self._resolved: Mapping[cst.CSTNode, CodeRange] | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if self._resolved is None:
            self._resolved = MetadataWrapper(self._module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._resolved[node]


def _segment_function(segment: Segment) -> cst.FunctionDef | None:
    """The function a segment of a whole function is (inside the `if 1:` an indented one is parsed in), found
    without walking it: the nested functions are in it, and walking a handler of hundreds of lines for every rule was
    most of a cold SGLang scan."""
    statement: cst.CSTNode | None = segment.module.body[0] if segment.module.body else None
    if isinstance(statement, cst.If) and isinstance(statement.body, cst.IndentedBlock) and statement.body.body:
        statement = statement.body.body[0]
    return statement if isinstance(statement, cst.FunctionDef) else None


def _anchors(tree: ast.Module, lines: list[str], needles: list[str], functions: bool = False,
             names: frozenset[str] | None = None) -> Iterator[tuple[ast.stmt, dict]]:
    """The statements to parse: gate-like statements, or (``functions``) whole functions with a needle (of ``names``
    only, when given)."""
    def text(node: ast.stmt | ast.expr) -> str:
        return "".join(lines[node.lineno - 1: node.end_lineno])  # whole lines: enough to find a needle

    def matches(node: ast.stmt) -> bool:
        probe = node.test if isinstance(node, (ast.If, ast.Assert)) else node
        return any(n in text(probe) for n in needles)

    def walk(body: list[ast.stmt], local_lists: dict) -> Iterator[tuple[ast.stmt, dict]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not functions:
                    yield from walk(node.body, {})
                elif (names is None or node.name in names) and any(n in text(node) for n in needles):
                    yield node, {}
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = _string_list(node.value)
                if value is not None:
                    local_lists = {**local_lists, node.targets[0].id: value}
            if isinstance(node, (ast.If, ast.Assert, ast.Raise)) and _chain_matches(node, matches):
                yield node, local_lists
                continue
            for block in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, block, None)
                if isinstance(children, list):
                    nested = [c for c in children if isinstance(c, ast.stmt)]
                    nested += [s for h in children if isinstance(h, ast.ExceptHandler) for s in h.body]
                    yield from walk(nested, local_lists)

    yield from walk(tree.body, {})


def _chain_matches(node: ast.stmt, matches: Callable[[ast.stmt], bool]) -> bool:
    """An if/elif chain is one statement: it matches if any of its tests does."""
    if not isinstance(node, ast.If):
        return matches(node)
    link: ast.If | None = node
    while link is not None:
        if matches(link):
            return True
        link = link.orelse[0] if len(link.orelse) == 1 and isinstance(link.orelse[0], ast.If) else None
    return False


def _string_list(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(values) == len(node.elts):
            return values
    return None


# ---------------------------------------------------------------------------------------------------
# Small readers of libcst nodes, shared by the matchers.


def dotted(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def call_name(node: cst.CSTNode) -> str | None:
    """``f`` for ``f(...)`` and ``obj.f(...)``."""
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name):
            return func.value
        if isinstance(func, cst.Attribute):
            return func.attr.value
    return None


def _text_value(node: cst.CSTNode) -> str | None:
    """A string literal's value; None for anything else, a bytes literal included."""
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def strings(node: cst.CSTNode) -> list[str] | None:
    """The values of a list/tuple/set of string literals, or of one string literal."""
    if isinstance(node, cst.SimpleString):
        value = _text_value(node)
        return [value] if value is not None else None
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        values = []
        for element in node.elements:
            value = _text_value(element.value)
            if value is None:
                return None
            values.append(value)
        return values
    return None


def message_template(raise_node: cst.Raise) -> tuple[str | None, str | None]:
    """The exception type and its message, with ``{expr}`` / ``{expr=}`` where values are formatted in."""
    exc = raise_node.exc
    if not isinstance(exc, cst.Call):
        return dotted(exc), None
    message = _template(exc.args[0].value) if exc.args else None
    return dotted(exc.func), message


def _template(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return _text_value(node)
    if isinstance(node, cst.ConcatenatedString):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
            elif isinstance(part, cst.FormattedStringExpression):
                expression = cst.Module([]).code_for_node(part.expression)
                out.append("{" + expression + ("=" if part.equal else "") + "}")
        return "".join(out)
    return None


def raise_in(block: cst.BaseSuite) -> cst.Raise | None:
    """A raise among the block's own statements (not nested deeper)."""
    for stmt in getattr(block, "body", ()):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Raise):
                    return small
    return None


def negated_nodes(test: cst.BaseExpression) -> list[cst.CSTNode]:
    return [u.expression for u in m.findall(test, m.UnaryOperation(operator=m.Not())) if isinstance(u, cst.UnaryOperation)]


def _contains(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """Whether ``inner`` is ``node`` or a node under it."""
    return node is inner or any(_contains(child, inner) for child in node.children)


# ---------------------------------------------------------------------------------------------------
# The matchers, one per gate kind: ``<Kind>Shape`` finds the sites of gates.<Kind>.

SHAPES: dict[str, Shape] = {}  # kind name -> its shape: filled as the classes below are defined


class Shape:
    """The matching half of a gate kind: ``needles`` pick the functions worth parsing, ``find`` the sites."""

    kind: ClassVar[type[Kind]]
    whole_functions: ClassVar[bool] = False  # parse whole functions that contain a needle, not just gate-like statements

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        SHAPES[cls.kind.name] = cls()

    def needles(self, rule: Rule) -> list[str]:
        return []

    def function_names(self, rule: Rule) -> frozenset[str] | None:
        """The only functions a whole-function shape finds sites in (None: any that has a needle); the others are
        not parsed."""
        return None

    def find(self, rule: Rule, segment: Segment) -> list[Site]:
        raise NotImplementedError


class ModelTypeAllowlistShape(Shape):
    """``if <method guard> and not any(s in <subject> for s in LIST): raise`` and its exact-membership form.

    params: ``subject`` (the dotted tail of the expression holding the model type, e.g.
    ``hf_text_config.model_type``), ``method_attribute`` (the name compared with the method, e.g. ``method``).
    """

    kind = ModelTypeAllowlist

    def needles(self, rule):
        return [rule.params["subject"]]

    def find(self, rule, segment):
        subject = rule.params["subject"]
        sites = []
        for node in m.findall(segment.module, m.If()):
            raised = raise_in(node.body)
            membership = raised and self._membership(node.test, subject)
            if not membership:
                continue
            semantics, list_node, subject_node, tested = membership
            values, list_name = self._values(list_node, segment)
            negated = any(_contains(n, tested) for n in negated_nodes(node.test))
            exception, message = message_template(raised)
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), exception, message, ModelTypeAllowlist.Details(
                                  semantics=semantics,
                                  values=values,
                                  list_name=list_name,
                                  subject=cst.Module([]).code_for_node(subject_node),
                                  allow=negated,
                                  methods=self._methods(node.test, rule.params.get("method_attribute", "method")),
                              )))
        return sites

    @staticmethod
    def _membership(test, subject):
        for call in m.findall(test, m.Call(func=m.Name("any"), args=[m.Arg(m.GeneratorExp())])):
            gen = call.args[0].value
            loop_var = dotted(gen.for_in.target)
            elt = gen.elt
            if (isinstance(elt, cst.Comparison) and dotted(elt.left) == loop_var
                    and isinstance(elt.comparisons[0].operator, cst.In)
                    and (dotted(elt.comparisons[0].comparator) or "").endswith(subject)):
                return "substring", gen.for_in.iter, elt.comparisons[0].comparator, call
            if (call_name(elt) == "startswith" and (dotted(elt.func.value) or "").endswith(subject)
                    and elt.args and dotted(elt.args[0].value) == loop_var):
                return "prefix", gen.for_in.iter, elt.func.value, call
        for comparison in m.findall(test, m.Comparison()):
            target = comparison.comparisons[0]
            if (dotted(comparison.left) or "").endswith(subject) and isinstance(target.operator, (cst.In, cst.NotIn)):
                semantics = "exact" if isinstance(target.operator, cst.In) else "exact-not"
                return semantics, target.comparator, comparison.left, comparison
        return None

    @staticmethod
    def _values(list_node, segment):
        literal = strings(list_node)
        if literal is not None:
            return literal, None
        name = dotted(list_node)
        if name is None:
            return None, None
        # The list is usually bound just before the test, in the same function.
        if name in segment.local_lists:
            return segment.local_lists[name], name
        value = segment.info.literals.get(name)
        if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            return list(value), name
        return None, name

    @staticmethod
    def _methods(test, attribute):
        methods: list[str] = []
        for comparison in m.findall(test, m.Comparison()):
            left = dotted(comparison.left) or ""
            if left != attribute and not left.endswith("." + attribute):
                continue
            target = comparison.comparisons[0]
            if isinstance(target.operator, (cst.Equal, cst.In)):
                methods += strings(target.comparator) or []
        return methods


class InterfaceCheckShape(Shape):
    """``if not supports_x(model): raise`` (or ``if supports_x(model): ... else: raise``).

    params: ``call`` (the check function), ``protocol`` (the Protocol it tests, read from the engine's
    interfaces module), optional ``message_contains`` to pick one site among several.
    """

    kind = InterfaceCheck

    def needles(self, rule):
        return [rule.params["call"]]

    def find(self, rule, segment):
        call = rule.params["call"]
        wanted = rule.params.get("message_contains")
        sites = []
        for node in m.findall(segment.module, m.If()):
            test = node.test
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) \
                    and call_name(test.expression) == call:
                raised = raise_in(node.body)
            elif call_name(test) == call and isinstance(node.orelse, cst.Else):
                raised = raise_in(node.orelse.body)
            else:
                continue
            if raised is None:
                continue
            exception, message = message_template(raised)
            if wanted and wanted not in (message or ""):
                continue
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), exception, message,
                              InterfaceCheck.Details(call, rule.params["protocol"])))
        return sites


class ConfigAttributeDispatchShape(Shape):
    """Reads of the target's config under a capability guard, dispatched by the target's class name::

        if supports_multimodal(target_model):
            if self.get_model_name(target_model) in ["Qwen2_5_VL..."]:
                x = target_model.config.image_token_id
            else:
                x = target_model.config.image_token_index

    params: ``guard`` (the capability call), ``guard_protocol`` (the Protocol whose flag the guard reads),
    ``class_name_calls`` (calls that return the class name, besides ``type(x).__name__``).
    """

    kind = ConfigAttributeDispatch

    def needles(self, rule):
        return [rule.params["guard"]]

    def find(self, rule, segment):
        guard = rule.params["guard"]
        namers = set(rule.params.get("class_name_calls", []))
        sites = []
        for node in m.findall(segment.module, m.If(test=m.Call())):
            if call_name(node.test) != guard or not node.test.args:
                continue
            subject = dotted(node.test.args[0].value)
            if subject is None:
                continue
            branches = []
            dispatched: list[cst.CSTNode] = []
            for stmt in node.body.body:
                if isinstance(stmt, cst.If) and self._names(stmt.test, subject, namers) is not None:
                    branches += self._chain(stmt, subject, namers, segment)
                    dispatched.append(stmt)
            undispatched = [s for s in node.body.body if not any(s is d for d in dispatched)]
            reads = [r for s in undispatched for r in self._reads(s, subject)]
            if reads:
                branches.append(ConfigAttributeDispatch.Branch(None, reads, segment.line(node), dispatch=False))
            if not branches:
                continue
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), "AttributeError",
                              "'{config_class}' object has no attribute '{attribute}'",
                              ConfigAttributeDispatch.Details(guard, subject, branches)))
        return sites

    def _chain(self, node, subject, namers, segment):
        branches = []
        current: cst.CSTNode | None = node
        while isinstance(current, cst.If):
            names = self._names(current.test, subject, namers)
            if names is None:
                break
            branches.append(ConfigAttributeDispatch.Branch(names, self._reads(current.body, subject),
                                                           segment.line(current), dispatch=True))
            current = current.orelse
        if isinstance(current, (cst.Else, cst.If)):
            body = current.body
            branches.append(ConfigAttributeDispatch.Branch(None, self._reads(body, subject), segment.line(current),
                                                           dispatch=True))
        return branches

    @staticmethod
    def _names(test, subject, namers):
        """The class names an if-test compares the subject's class name with, or None if it does not."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        left = test.left
        is_name = (
            (call_name(left) in namers and left.args and dotted(left.args[0].value) == subject)
            or dotted(left) in (f"{subject}.__class__.__name__",)
            or (isinstance(left, cst.Attribute) and left.attr.value == "__name__" and call_name(left.value) == "type"
                and left.value.args and dotted(left.value.args[0].value) == subject)
        )
        if not is_name or not isinstance(test.comparisons[0].operator, (cst.Equal, cst.In)):
            return None
        return strings(test.comparisons[0].comparator)

    @staticmethod
    def _reads(node, subject):
        prefix = f"{subject}.config."
        reads = []
        for attribute in m.findall(node, m.Attribute()):
            chain = dotted(attribute)
            if chain and chain.startswith(prefix):
                reads.append(chain[len(prefix) - len("config."):])
        # Keep the longest chains: config.vision_config.image_token_id, not also config.vision_config.
        return sorted({r for r in reads if not any(o != r and o.startswith(r + ".") for o in reads)})


class RegistryLookupShape(Shape):
    """The engine's refusal of an architecture its registry does not know.

    params: ``message_contains`` (text of the raise's message that identifies it).
    """

    kind = RegistryLookup

    def needles(self, rule):
        return [rule.params["message_contains"]]

    def find(self, rule, segment):
        sites = []
        for node in m.findall(segment.module, m.Raise()):
            exception, message = message_template(node)
            if message and rule.params["message_contains"] in message:
                sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                                  segment.excerpt(node), exception, message))
        return sites


class CandidateShape(Shape):
    """A raise or assert whose condition reads model identity or config attributes, that no rule names.

    params: ``reads`` (attribute names whose presence in the condition makes it a candidate).
    """

    kind = Candidate

    def needles(self, rule):
        return list(rule.params["reads"])

    def find(self, rule, segment):
        reads = set(rule.params["reads"])
        sites = []
        for node in m.findall(segment.module, m.If() | m.Assert()):
            test = node.test
            attributes = {a.attr.value for a in m.findall(test, m.Attribute())}
            if not attributes & reads:
                continue
            if isinstance(node, cst.If):
                raised = raise_in(node.body)
                if raised is None:
                    continue
                exception, message = message_template(raised)
            else:
                exception = "AssertionError"
                message = _template(node.msg) if node.msg is not None else None
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), exception, message,
                              Candidate.Details(sorted(attributes & reads))))
        return sites


class DraftClassCheckShape(Shape):
    """``if self.method == "eagle3": assert isinstance(self.model, (DraftA, DraftB))``: the draft classes
    the proposer accepts for a method.

    params: ``methods`` (the method names whose branch is read).
    """

    kind = DraftClassCheck

    def needles(self, rule):
        return list(rule.params["methods"])

    def find(self, rule, segment):
        wanted = set(rule.params["methods"])
        sites = []
        for node in m.findall(segment.module, m.If()):
            methods = ModelTypeAllowlistShape._methods(node.test, "method")
            if not wanted & set(methods):
                continue
            for check in m.findall(node.body, m.Assert(test=m.Call(func=m.Name("isinstance")))):
                classes = check.test.args[1].value if len(check.test.args) > 1 else None
                names = [dotted(e.value) for e in classes.elements] if isinstance(classes, cst.Tuple) else [dotted(classes)]
                if not all(names):
                    continue
                sites.append(Site(rule.id, segment.path, segment.line(check), segment.end_line(check),
                                  segment.excerpt(check), "AssertionError", None,
                                  DraftClassCheck.Details(methods, names)))
        return sites


class RequiredMethodShape(Shape):
    """``<receiver>.method(...)``: a method the engine calls on the target model, so the target class must
    have it; with the guard that turns its absence into a clear error, when the engine has one::

        if not hasattr(model, "set_eagle3_layers_to_capture"):
            raise ValueError(f"Model {model.__class__.__name__} does not implement ...")
        model.set_eagle3_layers_to_capture(layer_ids)

    params: ``method``; ``receivers`` (dotted tails naming the target model at the call, e.g.
    ``model_runner.model``: matched by whole components, so ``draft_model_runner.model`` is not one; a
    bare name, e.g. a ``model`` parameter, matches only itself);
    ``methods`` (the speculative methods the call is made for).
    """

    kind = RequiredMethod
    whole_functions = True

    def needles(self, rule):
        return [rule.params["method"]]

    def find(self, rule, segment):
        method = rule.params["method"]
        receivers = [r.split(".") for r in rule.params["receivers"]]
        guard = self._guard(segment.module, method)
        sites = []
        for call in m.findall(segment.module, m.Call(func=m.Attribute(attr=m.Name(method)))):
            receiver = (dotted(call.func.value) or "").split(".")
            # Whole trailing components; a bare name (a parameter) matches only itself.
            if not any(receiver == r if len(r) == 1 else receiver[-len(r):] == r for r in receivers):
                continue
            exception, message = guard or ("AttributeError", "'{model.__class__.__name__}' object has no attribute "
                                                             f"'{method}'")
            sites.append(Site(rule.id, segment.path, segment.line(call), segment.end_line(call),
                              segment.excerpt(call), exception, message,
                              RequiredMethod.Details(method, ".".join(receiver), guarded=guard is not None)))
        return sites

    @staticmethod
    def _guard(module, method):
        for node in m.findall(module, m.If(test=m.UnaryOperation(operator=m.Not(), expression=m.Call(func=m.Name("hasattr"))))):
            args = node.test.expression.args
            raised = raise_in(node.body)
            if raised and len(args) == 2 and strings(args[1].value) == [method]:
                return message_template(raised)
        return None


class ArgumentGateShape(Shape):
    """A raise (or assert) on the engine's argument checks whose conditions read launch arguments::

        if self.speculative_algorithm in ("EAGLE", "EAGLE3"):
            if self.speculative_eagle_topk > 1 and self.page_size > 1 and ...:
                raise ValueError("speculative_eagle_topk > 1 with page_size > 1 ...")

    Each site keeps every condition on the way to the raise (the enclosing ifs, negated in else
    branches), so it can be evaluated against a launch's arguments.

    params: ``functions`` (the engine's argument handlers that every launch with speculative decoding
    runs: only raises inside them are read, as a raise in a helper is reached only when its caller calls
    it), ``objects`` (names the arguments are read from: ``self``, ``cfg``, ``server_args``), ``arguments``
    (at least one must be read on the way: the speculative ones), ``dedicated`` (handlers that run only for the
    rule's methods: every raise in them is a gate, whatever it reads), ``defaults_files`` (where the declared
    defaults live; used when judging).
    """

    kind = ArgumentGate
    whole_functions = True

    def needles(self, rule):
        return list(rule.params["arguments"]) + list(rule.params.get("dedicated", ()))

    def function_names(self, rule):
        return frozenset(rule.params["functions"])  # find reads a handler alone

    def find(self, rule, segment):
        objects, wanted = set(rule.params["objects"]), set(rule.params["arguments"])
        sites: list[Site] = []
        code = cst.Module([]).code_for_node

        def reads(node) -> set[str]:
            attributes = (a for a in m.findall(node, m.Attribute()) if isinstance(a, cst.Attribute))
            return {a.attr.value for a in attributes if dotted(a.value) in objects}

        def names(node) -> set[str]:
            return {n.value for n in m.findall(node, m.Name()) if isinstance(n, cst.Name)}

        # On the way to a raise: the conditions (as code), the arguments they read, the names they say.
        def record(node, conditions, exception, message, read, named):
            if read & wanted or dedicated:
                sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                                  segment.excerpt(node), exception, message,
                                  ArgumentGate.Details(conditions, sorted(read),
                                                       {n: constants[n] for n in sorted(named) if n in constants})))

        def visit(statements, path, read, named):
            for stmt in statements:
                if isinstance(stmt, cst.If):
                    visit_if(stmt, path, read, named)
                elif isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assert):
                            message = _template(small.msg) if small.msg is not None else None
                            record(stmt, path + [f"not ({code(small.test)})"], "AssertionError", message,
                                   read | reads(small.test), named | names(small.test))
                elif hasattr(stmt, "body") and hasattr(stmt.body, "body"):
                    visit(stmt.body.body, path, read, named)  # with / for / try blocks

        def visit_if(node, path, read, named):
            test, own, said = code(node.test), read | reads(node.test), named | names(node.test)
            raised = raise_in(node.body)
            if raised is not None:
                record(node, path + [test], *message_template(raised), own, said)
            visit(node.body.body, path + [test], own, said)
            if isinstance(node.orelse, cst.If):
                visit_if(node.orelse, path + [f"not ({test})"], own, said)
            elif isinstance(node.orelse, cst.Else):
                raised = raise_in(node.orelse.body)
                if raised is not None:  # `if ok: ... else: raise`
                    record(node.orelse, path + [f"not ({test})"], *message_template(raised), own, said)
                visit(node.orelse.body.body, path + [f"not ({test})"], own, said)

        handlers = self.function_names(rule)
        dedicated = False
        function = _segment_function(segment)
        if function is not None and function.name.value in handlers:
            dedicated = function.name.value in rule.params.get("dedicated", ())
            # Names a condition may test against: string lists bound in the function or the module.
            if "string lists" not in segment.derived:  # the same for each rule: its handler walked once
                constants = {k: list(v) for k, v in segment.info.literals.items()
                             if isinstance(v, (list, tuple, set)) and all(isinstance(x, str) for x in v)}
                for assign in m.findall(function, m.Assign(targets=[m.AssignTarget(target=m.Name())])):
                    values = strings(assign.value)
                    if values is not None and not isinstance(assign.value, cst.SimpleString):
                        constants[assign.targets[0].target.value] = values
                segment.derived["string lists"] = constants
            constants = segment.derived["string lists"]
            visit(function.body.body, [], set(), set())
        return sites
