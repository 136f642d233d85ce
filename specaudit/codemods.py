"""Codemods of the patch bundles: each is one libcst transform anchored on a shape of code, with its
precondition (the gate it opens is there, as the scan sees it) checked before it runs.

Contract: ``apply(change, context) -> str | None``. It edits ``context.sources`` (the working copy of the
files, so several changes to one file compose) and returns None, or returns why it does not apply (the
precondition does not hold). Postconditions are checked by the caller, by scanning the edited sources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m

from .errors import SpecauditError
from .gates import Site, Status
from .index import ClassInfo
from .match import call_name, dotted, strings

if TYPE_CHECKING:
    from .evaluate import Judge
    from .index import TreeIndex


@dataclass(frozen=True)
class Change:
    id: str
    opens: str  # the gate rule id
    codemod: str
    args: dict[str, Any]
    bundle_dir: Path


@dataclass
class PatchContext:
    index: TreeIndex
    judges: dict[str, Judge]  # preset -> judge of the launch that preset describes
    sites: dict[str, list[Site]]  # rule id -> sites, as the scan sees the pristine tree
    protocols: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> edited source

    def source(self, relpath: str) -> str:
        if relpath not in self.sources:
            self.sources[relpath] = self.index.source(relpath).decode("utf-8")
        return self.sources[relpath]

    def blocking_sites(self, rule_id: str) -> list[Site]:
        """The rule's sites that block at least one of the bundle's targets."""
        from .gates import KINDS
        from .ruleset import load_rules

        rule = next(r for r in load_rules(self.index.tree.engine.name) if r.id == rule_id)
        return [site for site in self.sites.get(rule_id, [])
                if any(KINDS[rule.kind].judge(rule, site, judge).status == Status.BLOCKS for judge in self.judges.values())]

    def find_class(self, name: str, near: ClassInfo | None = None) -> ClassInfo | None:
        """The model class of that name; where several modules define one (deepseek_eagle.py has its own
        DeepseekV2Model), the one in ``near``'s module, else the one the registry names."""
        package = self.index.tree.engine.models_package
        found = sorted((m.classes[name] for m in list(self.index.modules.values())
                        if name in m.classes and m.name.startswith(package)), key=lambda c: c.module)
        if len(found) <= 1:
            return found[0] if found else None
        if near is not None:
            for cls in found:
                if cls.module == near.module:
                    return cls
        registered = {(e.module, e.class_name) for judge in self.judges.values() if judge.registry
                      for e in judge.registry.entries.values()}
        in_registry = [c for c in found if (c.module, c.name) in registered]
        if len(in_registry) == 1:
            return in_registry[0]
        raise SpecauditError(f"{name} is defined in {', '.join(c.module for c in found)}: the bundle must say which")


def _edit(context: PatchContext, relpath: str, transform: Callable[[cst.Module], cst.Module]) -> None:
    module = cst.parse_module(context.source(relpath))
    context.sources[relpath] = transform(module).code


# -- extend_allowlist ----------------------------------------------------------------------------------


def extend_allowlist(change: Change, context: PatchContext) -> str | None:
    """Add values to the list an allowlist gate tests (the list itself: the test keeps its semantics)."""
    sites = context.blocking_sites(change.opens)
    if not sites:
        return "the allowlist does not block these targets in this release"
    for site in sites:
        values = site.details["values"]
        add = [v for v in change.args["add"] if v not in values]
        if not add:
            continue

        def transform(module: cst.Module, site=site, values=values, add=add) -> cst.Module:
            return module.visit(_ExtendList(site.details["list_name"], values, add))

        _edit(context, site.file, transform)
    return None


class _ExtendList(cst.CSTTransformer):
    """The list literal with the gate's values: the one assigned to ``name`` when the gate names one."""

    def __init__(self, name: str | None, values: list[str], add: list[str]):
        self.name, self.values, self.add = name, values, add

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        named = len(original.targets) == 1 and dotted(original.targets[0].target) == self.name
        if self.name is None or not named or not isinstance(updated.value, cst.List) \
                or strings(updated.value) != self.values:
            return updated
        return updated.with_changes(value=self._extended(updated.value))

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.List:
        if self.name is not None or strings(original) != self.values:
            return updated
        return self._extended(updated)

    def _extended(self, updated: cst.List) -> cst.List:
        elements = list(updated.elements)
        last = elements[-1]
        if isinstance(last.comma, cst.Comma) and len(elements) > 1:  # one element a line, trailing comma
            line_break = elements[-2].comma
            elements[-1] = last.with_changes(comma=line_break)
            new = [cst.Element(cst.SimpleString(f'"{v}"'), comma=line_break) for v in self.add]
            new[-1] = new[-1].with_changes(comma=last.comma)
        else:
            separator = elements[0].comma if len(elements) > 1 else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            elements[-1] = last.with_changes(comma=separator)
            new = [cst.Element(cst.SimpleString(f'"{v}"'), comma=separator) for v in self.add]
            new[-1] = new[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(elements=elements + new)


# -- add_dispatch_branch -------------------------------------------------------------------------------


def add_dispatch_branch(change: Change, context: PatchContext) -> str | None:
    """Give classes their own branch in a class-name dispatch, reading the attribute their config has."""
    sites = context.blocking_sites(change.opens)
    if not sites:
        return "the dispatch does not send these targets to an attribute their config lacks"
    for site in sites:
        fallback = next((b for b in site.details["branches"] if b["names"] is None and b["dispatch"]), None)
        if fallback is None:
            return f"{site.file}:{site.line} has no class-name dispatch to extend"
        old = fallback["reads"][0]  # e.g. config.image_token_index
        transform = _AddBranch(site.details["guard"], site.details["subject"], change.args["classes"], old,
                               change.args["attribute"])
        _edit(context, site.file, lambda module, t=transform: module.visit(t))
        if not transform.done:
            return f"{site.file}:{site.line}: the dispatch's else branch was not found"
    return None


class _AddBranch(cst.CSTTransformer):
    """Inside `if <guard>(<subject>):`, the chain that compares the subject's class name gets a branch
    before its final else."""

    def __init__(self, guard: str, subject: str, classes: list[str], old_read: str, attribute: str):
        self.guard, self.subject, self.classes, self.old_read, self.attribute = guard, subject, classes, old_read, attribute
        self.guards: list[cst.If] = []
        self.done = False

    def _is_guard(self, node: cst.If) -> bool:
        return (call_name(node.test) == self.guard and bool(node.test.args)
                and dotted(node.test.args[0].value) == self.subject)

    def visit_If(self, node: cst.If) -> bool:
        if self._is_guard(node):
            self.guards.append(node)
        return True

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        if self.guards and original is self.guards[-1]:
            self.guards.pop()
            return updated
        if self.done or not self.guards or not isinstance(updated.orelse, cst.Else) \
                or not _is_name_test(updated.test, self.subject):
            return updated
        names = [cst.Element(cst.SimpleString(f'"{c}"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                 for c in self.classes]
        # a one-element tuple keeps its comma: ("KimiK25ForConditionalGeneration",)
        names[-1] = names[-1].with_changes(comma=cst.Comma() if len(names) == 1 else cst.MaybeSentinel.DEFAULT)
        test = cst.Comparison(left=updated.test.left, comparisons=[cst.ComparisonTarget(cst.In(), cst.Tuple(names))])
        body = updated.orelse.body.visit(_ReplaceRead(f"{self.subject}.{self.old_read}",
                                                      f"{self.subject}.config.{self.attribute}"))
        self.done = True
        return updated.with_changes(orelse=cst.If(test=test, body=body, orelse=updated.orelse))


def _is_name_test(test: cst.BaseExpression, subject: str) -> bool:
    return (isinstance(test, cst.Comparison) and call_name(test.left) is not None
            and any(dotted(a.value) == subject for a in getattr(test.left, "args", ())))


class _ReplaceRead(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return cst.parse_expression(self.new) if dotted(original) == self.old else updated


# -- implement_protocol --------------------------------------------------------------------------------


def implement_protocol(change: Change, context: PatchContext) -> str | None:
    """Make a class satisfy a protocol: the protocol as a base, and the members the release's protocol has
    that the class lacks, from the bundle's code file."""
    cls = context.find_class(change.args["class"])
    if cls is None:
        return f"this release has no class {change.args['class']}"
    protocol = context.protocols.get(change.args["protocol"])
    if protocol is None:
        return f"this release has no protocol {change.args['protocol']}"
    if context.judges and next(iter(context.judges.values())).resolver.conformance(cls, protocol).conforms:
        return f"{cls.name} already satisfies {protocol.cls.name}"
    members = _template_functions(change)
    missing = [members[name] for name in protocol.members if name in members and name not in cls.bound]
    module_info = context.index.module(cls.module)
    _require_names(members_code=missing, module_info=module_info, change=change)
    protocol_module = protocol.cls.module

    def transform(module: cst.Module) -> cst.Module:
        module = module.visit(_AddToClass(cls.name, base=protocol.cls.name, methods=missing))
        return _ensure_import(module, protocol_module, protocol.cls.name, module_info)

    _edit(context, module_info.path, transform)
    return None


class _AddToClass(cst.CSTTransformer):
    def __init__(self, name: str, base: str | None, methods: list[cst.FunctionDef]):
        self.name, self.base, self.methods = name, base, list(methods)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if original.name.value != self.name:
            return updated
        bases = list(updated.bases)
        if self.base and not any(dotted(a.value) == self.base for a in bases):
            last = bases[-1]
            if isinstance(last.comma, cst.Comma):  # one base a line, with a trailing comma
                bases.append(cst.Arg(cst.Name(self.base), comma=last.comma))
            else:
                bases[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                bases.append(cst.Arg(cst.Name(self.base)))
        body = list(updated.body.body) + [
            method.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for method in self.methods]
        return updated.with_changes(bases=bases, body=updated.body.with_changes(body=body))


def _ensure_import(module: cst.Module, source_module: str, name: str, info) -> cst.Module:
    """Import ``name`` from ``source_module``: added to an import from that module the file has, else a new one."""
    if name in info.imports or name in info.classes:
        return module
    sibling = next((local for local, imp in info.imports.items() if imp.module == source_module and imp.name), None)
    if sibling is not None:
        return module.visit(_AddImportName(sibling, name))
    statement = cst.parse_statement(f"from {source_module} import {name}\n")
    body = list(module.body)
    last_import = max((i for i, s in enumerate(body) if m.matches(s, m.SimpleStatementLine(body=[m.ImportFrom() | m.Import()]))),
                      default=-1)
    body.insert(last_import + 1, statement)
    return module.with_changes(body=body)


class _AddImportName(cst.CSTTransformer):
    """Append a name to the `from ... import` statement that imports ``sibling``."""

    def __init__(self, sibling: str, name: str):
        self.sibling, self.name, self.done = sibling, name, False

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if self.done or isinstance(updated.names, cst.ImportStar):
            return updated
        names = list(updated.names)
        if not any((a.asname.name.value if a.asname else a.name.value) == self.sibling for a in names):
            return updated
        self.done = True
        last = names[-1]
        if isinstance(last.comma, cst.Comma) and len(names) > 1:  # one name a line, trailing comma
            names[-1] = last.with_changes(comma=names[-2].comma)
            names.append(cst.ImportAlias(cst.Name(self.name), comma=last.comma))
        else:
            names[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            names.append(cst.ImportAlias(cst.Name(self.name)))
        return updated.with_changes(names=names)


# -- collect_aux_hidden_states -------------------------------------------------------------------------


def collect_aux_hidden_states(change: Change, context: PatchContext) -> str | None:
    """Make a decoder stack's forward collect the residual stream entering the configured aux layers and
    return it beside the final hidden states (and pass it between pipeline stages), as LlamaModel does."""
    owner = context.find_class(change.args["for_class"])
    protocol = context.protocols.get(change.args["protocol"])
    if owner is None or protocol is None:
        return f"this release has no {change.args['for_class']} or no {change.args['protocol']}"
    if next(iter(context.judges.values())).resolver.conformance(owner, protocol).conforms:
        return f"{owner.name} already satisfies {protocol.cls.name}"
    cls = context.find_class(change.args["class"], near=owner)
    if cls is None:
        return f"this release has no class {change.args['class']}"
    if "aux_hidden_state_layers" in cls.bound:
        return f"{cls.name} already collects aux hidden states"
    helpers = list(_template_functions(change).values())
    module_info = context.index.module(cls.module)
    _require_names(members_code=helpers, module_info=module_info, change=change)
    transform = _CollectAux(cls.name, helpers)
    _edit(context, module_info.path, lambda module: module.visit(transform))
    if transform.problems:
        return "; ".join(transform.problems)
    return None


class _CollectAux(cst.CSTTransformer):
    def __init__(self, name: str, helpers: list[cst.FunctionDef]):
        self.name, self.helpers = name, helpers
        self.problems: list[str] = []
        self.in_class = False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.in_class = node.name.value == self.name
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        if original.name.value != self.name:
            return updated
        self.in_class = False
        body = list(updated.body.body) + [h.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
                                          for h in self.helpers]
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if not self.in_class:
            return updated
        if original.name.value == "__init__":
            init = cst.parse_statement("self.aux_hidden_state_layers = tuple[int, ...]()\n")
            return updated.with_changes(body=updated.body.with_changes(body=[*updated.body.body, init]))
        if original.name.value == "forward":
            return self._forward(updated)
        return updated

    def _forward(self, function: cst.FunctionDef) -> cst.FunctionDef:
        statements = list(function.body.body)
        loop = next((i for i, s in enumerate(statements) if isinstance(s, cst.For)
                     and call_name(s.iter) == "islice" and dotted(s.iter.args[0].value) == "self.layers"), None)
        last_return = max((i for i, s in enumerate(statements)
                           if m.matches(s, m.SimpleStatementLine(body=[m.Return()]))), default=None)
        if loop is None or last_return is None or last_return < loop:
            self.problems.append(f"{self.name}.forward has no `for layer in islice(self.layers, ...)` loop "
                                 "followed by a return")
            return function
        old = statements[loop]
        layer = cst.Module([]).code_for_node(old.target)
        collect = cst.parse_statement(
            "if idx in self.aux_hidden_state_layers:\n"
            "    aux_hidden_states[self.aux_hidden_state_layers.index(idx)] = (\n"
            f"        self._aux_hidden_state({layer}, hidden_states, residual)\n"
            "    )\n")
        new_loop = old.with_changes(
            target=cst.Tuple([cst.Element(cst.Name("idx")), cst.Element(old.target)], lpar=[], rpar=[]),
            iter=cst.Call(cst.Name("enumerate"), args=[
                cst.Arg(old.iter, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(cst.parse_expression("self.start_layer"), keyword=cst.Name("start"),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace("")))]),
            body=old.body.with_changes(body=[collect, *old.body.body]))
        received = cst.parse_statement("aux_hidden_states = self._received_aux_hidden_states(intermediate_tensors)\n")
        returning = cst.parse_statement(
            "if self.aux_hidden_state_layers:\n    return hidden_states, aux_hidden_states\n")
        statements = (statements[:loop] + [received.with_changes(leading_lines=old.leading_lines),
                                           new_loop.with_changes(leading_lines=[])]
                      + statements[loop + 1:last_return] + [returning] + statements[last_return:])
        function = function.with_changes(body=function.body.with_changes(body=statements))
        sent = _SendAux()
        function = function.visit(sent)
        if not sent.done:
            self.problems.append(f"{self.name}.forward builds no IntermediateTensors({{...}}) for the next stage")
        return function


class _SendAux(cst.CSTTransformer):
    """``IntermediateTensors({"hidden_states": ..., "residual": ...})`` also carries the aux hidden states."""

    def __init__(self):
        self.done = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if call_name(original) != "IntermediateTensors" or not updated.args or not isinstance(updated.args[0].value, cst.Dict):
            return updated
        mapping = updated.args[0].value
        elements = list(mapping.elements)
        elements[-1] = elements[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(cst.StarredDictElement(cst.parse_expression(
            "self._aux_intermediate_tensors(aux_hidden_states, hidden_states)")))
        self.done = True
        return updated.with_changes(args=[updated.args[0].with_changes(value=mapping.with_changes(elements=elements))])


# -- shared ----------------------------------------------------------------------------------------------


def _template_functions(change: Change) -> dict[str, cst.FunctionDef]:
    path = (change.bundle_dir / change.args["code"]).resolve()
    try:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
    except (OSError, cst.ParserSyntaxError) as exc:
        raise SpecauditError(f"{path}: cannot read the bundle's code ({exc})") from None
    return {stmt.name.value: stmt.with_changes(leading_lines=[]) for stmt in module.body if isinstance(stmt, cst.FunctionDef)}


def _require_names(members_code: list[cst.FunctionDef], module_info, change: Change) -> None:
    """The code a bundle inserts may use only names the target module binds (its own imports)."""
    import builtins

    bound = set(module_info.imports) | set(module_info.classes) | set(module_info.functions) | set(module_info.aliases)
    for function in members_code:
        params = {p.name.value for p in function.params.params}
        local = _local_names(function)
        # Attribute names (`self.x`) and keyword names (`f(start=1)`) are not names the module must bind.
        not_free = {id(a.attr) for a in m.findall(function.body, m.Attribute())}
        not_free |= {id(a.keyword) for a in m.findall(function.body, m.Arg()) if a.keyword is not None}
        for name in m.findall(function.body, m.Name()):
            if id(name) in not_free:
                continue
            value = name.value
            if value in params or value in bound or value in local or hasattr(builtins, value):
                continue
            raise SpecauditError(f"{change.bundle_dir.name}/{change.args['code']}: {function.name.value} uses {value}, "
                                 f"which {module_info.path} does not import")


def _local_names(function: cst.FunctionDef) -> set[str]:
    """Names the function binds itself: assignment, loop and comprehension targets."""
    targets = m.findall(function, m.AssignTarget() | m.CompFor() | m.For())
    return {n.value for t in targets for n in m.findall(t.target, m.Name())}


CODEMODS: dict[str, Callable[[Change, PatchContext], str | None]] = {
    "extend_allowlist": extend_allowlist,
    "add_dispatch_branch": add_dispatch_branch,
    "implement_protocol": implement_protocol,
    "collect_aux_hidden_states": collect_aux_hidden_states,
}
