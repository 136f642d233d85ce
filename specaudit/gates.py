"""Stage 4: gate kinds. Each kind is one small unit with a two-part contract, as a Fixit rule is:

* ``find(segment, context) -> [Site]``: where the shape occurs in the engine (target-independent,
  cached by file content), with the code, the exception and message the engine would raise, and the
  facts the shape carries (the list and its semantics, the class-name dispatch, the call...);
* ``judge(site, judge) -> Finding``: whether that gate stops a given launch, and why.

Rules in ``rules/`` pick a kind and give it parameters; adding a gate is a rule file, not code here.

Files are not parsed whole by libcst (seconds on the largest engine files): a cheap :mod:`ast` pass
picks the functions that contain a rule's needles, and only those are parsed, with their positions
shifted back to the file's lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from .index import ModuleInfo

if TYPE_CHECKING:
    from .evaluate import Judge
    from .ruleset import Rule

MAX_EXCERPT_LINES = 16


class Status:
    BLOCKS = "blocks"
    PASSES = "passes"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not applicable"
    UNCLASSIFIED = "unclassified"


@dataclass(frozen=True)
class Site:
    """One place in the engine where a rule's shape matched."""

    rule_id: str
    file: str
    line: int
    end_line: int
    code: str
    exception: str | None  # the exception type the engine raises there
    message: str | None  # its message, with {expression} where the engine formats a value in
    details: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Finding:
    """A site judged against a launch."""

    rule_id: str
    title: str
    phase: str
    status: str
    file: str
    line: int
    code: str
    error: str | None  # the error text the engine would print, as far as it can be rendered
    why: str
    hint: str


@dataclass
class Segment:
    """A function of a file, parsed by libcst on its own; ``offset`` maps its lines back to the file."""

    module: cst.Module
    positions: Any
    offset: int
    info: ModuleInfo  # the file's module-level facts: literals a gate names
    path: str

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line + self.offset

    def end_line(self, node: cst.CSTNode) -> int:
        return self.positions[node].end.line + self.offset

    def excerpt(self, node: cst.CSTNode) -> str:
        """The node's source lines as the file has them (from its first line, without leading comments)."""
        start = self.positions[node].start
        lines = self.module.code.splitlines()[start.line - 1: self.positions[node].end.line]
        if len(lines) > MAX_EXCERPT_LINES:
            lines = lines[:MAX_EXCERPT_LINES] + [" " * start.column + "..."]
        return "\n".join(x[start.column:] if x[:start.column].isspace() else x.lstrip() for x in lines)


def segments(source: str, needles: list[str], info: ModuleInfo, path: str) -> Iterator[Segment]:
    """The outermost functions of ``source`` whose text contains any needle, each parsed by libcst."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    lines = source.splitlines(keepends=True)
    for node in _outermost_functions(tree):
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        text = "".join(lines[start - 1: node.end_lineno])
        if needles and not any(n in text for n in needles):
            continue
        indented = bool(text[:1].isspace())
        # An indented def parses inside `if 1:`, which accepts any block indentation.
        code = ("if 1:\n" + text) if indented else text
        try:
            module = cst.parse_module(code)
        except cst.ParserSyntaxError:
            continue
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        yield Segment(module, wrapper.resolve(PositionProvider), start - 1 - int(indented), info, path)


def _outermost_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, (ast.ClassDef, ast.If, ast.Try, ast.With)):
            for child in reversed(list(ast.iter_child_nodes(node))):
                if isinstance(child, ast.stmt):
                    stack.append(child)


# ---------------------------------------------------------------------------------------------------
# Small readers of libcst nodes, shared by the kinds.


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


def strings(node: cst.CSTNode) -> list[str] | None:
    """The values of a list/tuple/set of string literals, or of one string literal."""
    if isinstance(node, cst.SimpleString):
        return [node.evaluated_value]
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        values = []
        for element in node.elements:
            if not isinstance(element.value, cst.SimpleString):
                return None
            values.append(element.value.evaluated_value)
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
        return node.evaluated_value
    if isinstance(node, cst.ConcatenatedString):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
            else:
                expression = cst.Module([]).code_for_node(part.expression)
                out.append("{" + expression + ("=" if part.equal else "") + "}")
        return "".join(out)
    return None


def render_message(template: str | None, values: dict[str, Any]) -> str | None:
    """Fill a message template with the values the engine would format in; unknown ones stay ``{expr}``."""
    if template is None:
        return None

    def fill(match: re.Match) -> str:
        expression, equal = match.group(1), match.group(2)
        if expression not in values:
            return match.group(0)
        value = values[expression]
        return f"{expression}={value!r}" if equal else str(value)

    return re.sub(r"\{([^{}=]+?)(=?)\}", fill, template)


def raise_in(block: cst.BaseSuite) -> cst.Raise | None:
    """A raise among the block's own statements (not nested deeper)."""
    for stmt in getattr(block, "body", ()):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Raise):
                    return small
    return None


def negated_nodes(test: cst.BaseExpression) -> list[cst.CSTNode]:
    return [u.expression for u in m.findall(test, m.UnaryOperation(operator=m.Not()))]


def _contains(node: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return node is inner or any(n is inner for n in m.findall(node, m.DoNotCare()))


# ---------------------------------------------------------------------------------------------------
# The kinds.


class Kind:
    """The contract of a gate kind. ``needles`` pick the functions worth parsing."""

    name = ""

    def needles(self, rule: "Rule") -> list[str]:
        return []

    def find(self, rule: "Rule", segment: Segment) -> list[Site]:
        raise NotImplementedError

    def judge(self, rule: "Rule", site: Site, judge: "Judge") -> Finding:
        raise NotImplementedError

    @staticmethod
    def finding(rule: "Rule", site: Site, status: str, why: str, error: str | None = None) -> Finding:
        return Finding(rule.id, rule.title, rule.phase, status, site.file, site.line, site.code,
                       error, why, rule.hint)


class ModelTypeAllowlist(Kind):
    """``if <method guard> and not any(s in <subject> for s in LIST): raise`` and its exact-membership form.

    params: ``subject`` (the dotted tail of the expression holding the model type, e.g.
    ``hf_text_config.model_type``), ``method_attribute`` (the name compared with the method, e.g. ``method``).
    """

    name = "model_type_allowlist"

    def needles(self, rule):
        return [rule.params["subject"].rsplit(".", 1)[-1]]

    def find(self, rule, segment):
        subject = rule.params["subject"]
        sites = []
        for node in m.findall(segment.module, m.If()):
            raised = raise_in(node.body)
            membership = raised and self._membership(node.test, subject)
            if not membership:
                continue
            semantics, list_node, subject_node, tested = membership
            values, list_name = self._values(list_node, segment, node)
            negated = any(_contains(n, tested) for n in negated_nodes(node.test))
            exception, message = message_template(raised)
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), exception, message, {
                                  "semantics": semantics,
                                  "values": values,
                                  "list_name": list_name,
                                  "subject": cst.Module([]).code_for_node(subject_node),
                                  "allow": negated,  # raise unless listed (an allowlist) or if listed
                                  "methods": self._methods(node.test, rule.params.get("method_attribute", "method")),
                              }))
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
    def _values(list_node, segment, if_node):
        literal = strings(list_node)
        if literal is not None:
            return literal, None
        name = dotted(list_node)
        if name is None:
            return None, None
        # The list is usually bound just before the test, in the same function.
        for assign in m.findall(segment.module, m.Assign(targets=[m.AssignTarget(target=m.Name(name))])):
            if segment.line(assign) <= segment.line(if_node):
                found = strings(assign.value)
                if found is not None:
                    return found, name
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

    def judge(self, rule, site, judge):
        d = site.details
        methods = d["methods"]
        if methods and judge.launch.method not in methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"applies to {', '.join(methods)} only")
        target = judge.launch.target
        if d["values"] is None:
            return self.finding(rule, site, Status.UNKNOWN, f"the list {d['list_name']} is not a literal specaudit can read")
        model_type = target.text_model_type
        values = d["values"]
        if d["semantics"] == "substring":
            hits = [v for v in values if v in model_type]
            listed = bool(hits)
            how = (f"substring test: {hits[0]!r} is in {model_type!r}" if hits
                   else f"substring test: none of {values} occurs in {model_type!r}")
        elif d["semantics"] == "prefix":
            listed = any(model_type.startswith(v) for v in values)
            how = f"prefix test of {model_type!r} against {values}"
        else:
            listed = model_type in values
            how = f"exact membership of {model_type!r} in {values}"
        if d["semantics"] == "exact-not":
            listed = not listed
        blocked = listed != d["allow"]
        rendered = render_message(site.message, {
            **({d["list_name"]: values} if d["list_name"] else {}),
            d["subject"]: model_type,
            **{f"self.{rule.params.get('method_attribute', 'method')}": judge.launch.method},
        })
        error = f"{site.exception}: {rendered}" if rendered else site.exception
        subject = f"the target's text model type (hf_text_config.model_type) is {model_type!r}"
        if blocked:
            return self.finding(rule, site, Status.BLOCKS, f"{subject}; {how}", error)
        return self.finding(rule, site, Status.PASSES, f"{subject}; {how}")


class InterfaceCheck(Kind):
    """``if not supports_x(model): raise`` (or ``if supports_x(model): ... else: raise``).

    params: ``call`` (the check function), ``protocol`` (the Protocol it tests, read from the engine's
    interfaces module), optional ``message_contains`` to pick one site among several.
    """

    name = "interface_check"

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
                              {"call": call, "protocol": rule.params["protocol"]}))
        return sites

    def judge(self, rule, site, judge):
        methods = rule.params.get("methods")
        if methods and judge.launch.method not in methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"applies to {', '.join(methods)} only")
        target_class = judge.target_class()
        if target_class is None:
            return self.finding(rule, site, Status.UNKNOWN, judge.target_class_problem())
        conformance = judge.conformance(target_class, site.details["protocol"])
        error = f"{site.exception}: {site.message}" if site.message else site.exception
        label = f"{target_class.name} ({target_class.module})"
        if conformance is None:
            return self.finding(rule, site, Status.UNKNOWN,
                                f"the engine defines no protocol {site.details['protocol']} in this release")
        if conformance.conforms:
            return self.finding(rule, site, Status.PASSES, f"{label} satisfies {conformance.protocol}: {conformance.reason}")
        if conformance.conforms is None:
            return self.finding(rule, site, Status.UNKNOWN, f"{label}: {conformance.reason}")
        return self.finding(rule, site, Status.BLOCKS,
                            f"{label} does not satisfy {conformance.protocol}: {conformance.reason}", error)


class ConfigAttributeDispatch(Kind):
    """Reads of the target's config under a capability guard, dispatched by the target's class name::

        if supports_multimodal(target_model):
            if self.get_model_name(target_model) in ["Qwen2_5_VL..."]:
                x = target_model.config.image_token_id
            else:
                x = target_model.config.image_token_index

    params: ``guard`` (the capability call), ``guard_protocol`` (the Protocol whose flag the guard reads),
    ``class_name_calls`` (calls that return the class name, besides ``type(x).__name__``).
    """

    name = "config_attribute_dispatch"

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
                branches.append({"names": None, "reads": reads, "line": segment.line(node), "dispatch": False})
            if not branches:
                continue
            sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                              segment.excerpt(node), "AttributeError",
                              "'{config_class}' object has no attribute '{attribute}'",
                              {"guard": guard, "subject": subject, "branches": branches}))
        return sites

    def _chain(self, node, subject, namers, segment):
        branches = []
        current: cst.CSTNode | None = node
        while isinstance(current, cst.If):
            names = self._names(current.test, subject, namers)
            if names is None:
                break
            branches.append({"names": names, "reads": self._reads(current.body, subject),
                             "line": segment.line(current), "dispatch": True})
            current = current.orelse
        if isinstance(current, (cst.Else, cst.If)):
            body = current.body
            branches.append({"names": None, "reads": self._reads(body, subject),
                             "line": segment.line(current), "dispatch": True})
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

    def judge(self, rule, site, judge):
        target_class = judge.target_class()
        if target_class is None:
            return self.finding(rule, site, Status.UNKNOWN, judge.target_class_problem())
        guard = judge.conformance(target_class, rule.params["guard_protocol"])
        if guard is None or guard.conforms is None:
            why = guard.reason if guard else f"no protocol {rule.params['guard_protocol']} in this release"
            return self.finding(rule, site, Status.UNKNOWN, f"cannot tell whether {site.details['guard']} holds: {why}")
        if not guard.conforms:
            return self.finding(rule, site, Status.NOT_APPLICABLE,
                                f"{target_class.name} is not {rule.params['guard_protocol']}: the branch is skipped")
        branch = next((b for b in site.details["branches"] if b["names"] is None or target_class.name in b["names"]), None)
        if branch is None:
            return self.finding(rule, site, Status.PASSES, f"no branch reads the config of {target_class.name}")
        taken = ("the class-name dispatch sends it to the fallback branch" if branch["dispatch"] and branch["names"] is None
                 else f"the class-name dispatch names it (line {branch['line']})" if branch["dispatch"]
                 else "it is read for every multimodal target")
        missing = [r for r in branch["reads"] if not judge.launch.target.config_value(r.split(".", 1)[1])[0]]
        reads = ", ".join(branch["reads"])
        if not missing:
            return self.finding(rule, site, Status.PASSES, f"{target_class.name} reads {reads} ({taken}), which its config has")
        attribute = missing[0].rsplit(".", 1)[1]
        owner = missing[0].rsplit(".", 1)[0].split(".")[-1]
        config_class = judge.config_class_name(owner)
        has = judge.token_attributes()
        also = f"; its config has {', '.join(has)} instead" if has else ""
        error = f"AttributeError: '{config_class}' object has no attribute '{attribute}'"
        return self.finding(rule, site, Status.BLOCKS,
                            f"{target_class.name} reads {missing[0]} ({taken}), which its config lacks{also}", error)


class RegistryLookup(Kind):
    """The engine's refusal of an architecture its registry does not know.

    params: ``message_contains`` (text of the raise's message that identifies it).
    """

    name = "registry_lookup"

    def needles(self, rule):
        return [rule.params["message_contains"]]

    def find(self, rule, segment):
        sites = []
        for node in m.findall(segment.module, m.Raise()):
            exception, message = message_template(node)
            if message and rule.params["message_contains"] in message:
                sites.append(Site(rule.id, segment.path, segment.line(node), segment.end_line(node),
                                  segment.excerpt(node), exception, message, {}))
        return sites

    def judge(self, rule, site, judge):
        architectures = judge.launch.target.architectures
        entry = judge.registry.lookup(architectures) if judge.registry else None
        if entry is not None:
            return self.finding(rule, site, Status.PASSES,
                                f"{entry.architecture} is registered as {entry.module}.{entry.class_name} ({entry.declared_in})")
        if judge.registry is None:
            return self.finding(rule, site, Status.UNKNOWN, "the engine's registry could not be read")
        rendered = render_message(site.message, {"architectures": architectures})
        fallback = (" With --trust-remote-code the engine may still try its Transformers backend through the "
                    "config's auto_map, which works only for remote code written for it."
                    if judge.launch.target.config.get("auto_map") else "")
        return self.finding(rule, site, Status.BLOCKS,
                            f"no architecture of {architectures} is in this release's registry.{fallback}",
                            f"{site.exception}: {rendered}")


class CandidateGate(Kind):
    """A raise or assert whose condition reads model identity or config attributes, that no rule names.

    params: ``reads`` (attribute names whose presence in the condition makes it a candidate).
    """

    name = "candidate"

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
                              segment.excerpt(node), exception, message, {"reads": sorted(attributes & reads)}))
        return sites

    def judge(self, rule, site, judge):
        return self.finding(rule, site, Status.UNCLASSIFIED,
                            f"its condition reads {', '.join(site.details['reads'])}; no rule classifies it yet",
                            f"{site.exception}: {site.message}" if site.message else site.exception)


KINDS: dict[str, Kind] = {k.name: k for k in (ModelTypeAllowlist(), InterfaceCheck(), ConfigAttributeDispatch(),
                                              RegistryLookup(), CandidateGate())}
