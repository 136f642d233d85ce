"""Codemods of the patch bundles: each bundle change runs one libcst codemod, anchored on a shape of code,
once the change's precondition (the gate it opens is there, as the scan sees it) holds.

Contract of a change: ``apply(change, context) -> str | None``. It edits ``context.sources`` (the working copy
of the files, so several changes to one file compose) and returns None, or returns why it does not apply and
leaves the working copy as it was. Postconditions are checked by the caller, by scanning the edited sources.

Contract of a codemod (a libcst ``Codemod``, unit-tested with ``CodemodTest``): it edits one module, or raises
``SkipFile`` with the reason when the shape it is anchored on is not there or its work is already done, or
``UnboundName`` when the code it inserts uses a name the module does not bind.
"""

from __future__ import annotations

import functools
import io
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import libcst as cst
import libcst.matchers as m
from libcst.codemod import Codemod, CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.codemod.visitors import ImportItem
from libcst.helpers import calculate_module_and_package
from libcst.metadata import ClassScope, GlobalScope, MetadataWrapper, ScopeProvider

from ..core.errors import SpecauditError
from ..core.types import Site, Status
from ..scan.facts import ClassInfo
from ..scan.match import call_name, dotted, strings
from .derive import CausalParts, causal_parts, layer_plan, stack_parts
from .layout import AddImports, appended, inserted
from .transplant import PassAuxToLogits, ThreadLayerCapture, TransplantAuxCapture, alias_properties

if TYPE_CHECKING:
    from ..scan.audit import LaunchJudge
    from ..scan.index import TreeIndex
    from ..scan.resolve import Protocol, Resolver


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
    judges: dict[str, LaunchJudge]  # preset -> judge of the launch that preset describes
    sites: dict[str, list[Site]]  # rule id -> sites, as the scan sees the pristine tree
    protocols: dict[str, Protocol]
    sources: dict[str, str] = field(default_factory=dict)  # relpath -> edited source
    encodings: dict[str, str] = field(default_factory=dict)  # relpath -> its PEP 263 encoding, as it is written back

    def source(self, relpath: str) -> str:
        if relpath not in self.sources:
            raw = self.index.source(relpath)
            encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]  # a `# -*- coding: latin-1 -*-` file
            try:
                self.sources[relpath] = raw.decode(encoding)
            except (UnicodeDecodeError, LookupError) as exc:
                raise SpecauditError(f"{relpath}: not readable as its declared encoding {encoding} ({exc})") from None
            self.encodings[relpath] = encoding
        return self.sources[relpath]

    def encoded(self, relpath: str) -> bytes:
        """The edited source, in the encoding the file declares."""
        encoding = self.encodings.get(relpath, "utf-8")
        try:
            return self.sources[relpath].encode(encoding)
        except UnicodeEncodeError:
            raise SpecauditError(f"{relpath}: the edit cannot be written in the file's encoding {encoding}") from None

    def blocking_sites(self, rule_id: str) -> list[Site]:
        """The rule's sites that block at least one of the bundle's targets."""
        from ..scan.gates import KINDS
        from ..scan.ruleset import load_rules

        rule = next(r for r in load_rules(self.index.tree.engine.name) if r.id == rule_id)

        def blocks(site: Site) -> bool:
            findings = (KINDS[rule.kind].judge(rule, site, judge) for judge in self.judges.values())
            return any(finding is not None and finding.status == Status.BLOCKS for finding in findings)

        return [site for site in self.sites.get(rule_id, []) if blocks(site)]

    def find_class(self, name: str, near: ClassInfo | None = None) -> ClassInfo | None:
        """The model class of that name (or dotted module path); where several modules define one (deepseek_eagle.py
        has its own DeepseekV2Model), the one in ``near``'s module, else the one the registry names."""
        if "." in name:
            return self.find_qualname(name)
        package = self.index.tree.engine.models_package
        found = sorted((info.classes[name] for info in list(self.index.modules.values())
                        if name in info.classes and info.name.startswith(package)), key=lambda c: c.module)
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

    def find_qualname(self, qualname: str) -> ClassInfo | None:
        """A class by its dotted module path (the donor a synthesized bundle names)."""
        module, _, name = qualname.rpartition(".")
        info = self.index.module(module)
        return info.classes.get(name) if info is not None else None

    @property
    def resolver(self) -> Resolver:
        return next(iter(self.judges.values())).resolver

    def path_of(self, cls: ClassInfo) -> str:
        """The file that defines a class find_class returned."""
        info = self.index.module(cls.module)
        if info is None:
            raise SpecauditError(f"{cls.module} is not in the index of {self.index.tree.root}")
        return info.path


def _edit(context: PatchContext, relpath: str, codemod: Callable[[CodemodContext], Codemod]) -> None:
    """Run a codemod on the working copy of a file (where it raises, the copy stays as it was)."""
    root = context.index.tree.root
    names = calculate_module_and_package(root, root / relpath)  # what the file's relative imports resolve against
    codemod_context = CodemodContext(filename=relpath, full_module_name=names.name, full_package_name=names.package)
    module = cst.parse_module(context.source(relpath))
    context.sources[relpath] = codemod(codemod_context).transform_module(module).code


ChangeApply = Callable[[Change, PatchContext], str | None]


def _whole(apply: ChangeApply) -> ChangeApply:
    """A change applies whole or not at all: where one of its codemods skips, the change returns the reason and
    leaves the working copy as it was before it."""

    @functools.wraps(apply)
    def run(change: Change, context: PatchContext) -> str | None:
        before = dict(context.sources)
        try:
            reason = apply(change, context)
        except SkipFile as skipped:
            reason = str(skipped)
        except UnboundName as exc:  # the bundle's code does not fit this release: planning refuses the bundle
            raise SpecauditError(f"{change.bundle_dir.name}/{change.args['code']}: {exc}") from None
        if reason is not None:
            context.sources.clear()
            context.sources.update(before)
        return reason

    return run


def _file(context: CodemodContext) -> str:
    return context.filename or "the module"


# -- extend_allowlist ----------------------------------------------------------------------------------


@_whole
def extend_allowlist(change: Change, context: PatchContext) -> str | None:
    """Add values to the list an allowlist gate tests (the list itself: the test keeps its semantics)."""
    sites = context.blocking_sites(change.opens)
    if not sites:
        return "the allowlist does not block these targets in this release"
    for site in sites:
        _edit(context, site.file, functools.partial(ExtendAllowlist, name=site.details.list_name,
                                                    values=site.details.values, add=change.args["add"]))
    return None


class ExtendAllowlist(VisitorBasedCodemodCommand):
    """The list literal holding the gate's ``values`` (the one assigned to ``name`` where the gate names one)
    gets the values of ``add`` it lacks, appended in the list's own layout."""

    def __init__(self, context: CodemodContext, name: str | None, values: Sequence[str], add: Sequence[str]) -> None:
        super().__init__(context)
        self.name, self.add = name, list(add)
        self.anchor = [v for v in values if v not in add]  # the gate's values, whether or not ``add`` is in already
        self.found = self.extended = False

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        edited = super().transform_module_impl(tree)
        what = f"list {self.name}" if self.name else "list literal"
        if not self.found:
            raise SkipFile(f"{_file(self.context)} has no {what} of {', '.join(self.anchor)}")
        if not self.extended:
            raise SkipFile(f"the {what} already has {', '.join(self.add)}")
        return edited

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        named = len(original_node.targets) == 1 and dotted(original_node.targets[0].target) == self.name
        if self.name is None or not named or not isinstance(updated_node.value, cst.List):
            return updated_node
        return updated_node.with_changes(value=self._extended(updated_node.value))

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        return self._extended(updated_node) if self.name is None else updated_node

    def _extended(self, node: cst.List) -> cst.List:
        values = strings(node)
        if values is None or [v for v in values if v not in self.add] != self.anchor:
            return node
        self.found = True
        new = [cst.Element(cst.SimpleString(f'"{v}"')) for v in self.add if v not in values]
        if not new:
            return node
        self.extended = True
        return node.with_changes(elements=inserted(node.elements, new, len(node.elements)))


# -- add_dispatch_branch -------------------------------------------------------------------------------


@_whole
def add_dispatch_branch(change: Change, context: PatchContext) -> str | None:
    """Give classes their own branch in a class-name dispatch, reading the attribute their config has."""
    sites = context.blocking_sites(change.opens)
    if not sites:
        return "the dispatch does not send these targets to an attribute their config lacks"
    for site in sites:
        fallback = next((b for b in site.details.branches if b.names is None and b.dispatch), None)
        if fallback is None:
            return f"{site.file}:{site.line} has no class-name dispatch to extend"
        _edit(context, site.file, functools.partial(
            AddDispatchBranch, guard=site.details.guard, subject=site.details.subject,
            classes=change.args["classes"], old_read=fallback.reads[0],  # e.g. config.image_token_index
            attribute=change.args["attribute"]))
    return None


class AddDispatchBranch(VisitorBasedCodemodCommand):
    """Inside ``if <guard>(<subject>):``, the if/elif chain that compares the subject's class name gets a branch
    for ``classes`` before its final else: the else branch's body, reading ``<subject>.config.<attribute>`` where
    the else branch reads ``<subject>.<old_read>``."""

    def __init__(self, context: CodemodContext, guard: str, subject: str, classes: Sequence[str], old_read: str,
                 attribute: str) -> None:
        super().__init__(context)
        self.guard, self.subject, self.classes = guard, subject, list(classes)
        self.old_read, self.new_read = f"{subject}.{old_read}", f"{subject}.config.{attribute}"
        self.guards: list[cst.If] = []  # the guards the visit is inside
        self.named: set[str] = set()  # the class names the dispatch's tests name already
        self.added = False

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        edited = super().transform_module_impl(tree)
        if set(self.classes) <= self.named:
            raise SkipFile(f"the dispatch on {self.subject}'s class name already names {', '.join(self.classes)}")
        if not self.added:
            raise SkipFile(f"{_file(self.context)} has no `if {self.guard}({self.subject}):` with a dispatch on its "
                           "class name that ends in an else")
        return edited

    def visit_If(self, node: cst.If) -> bool:
        test = node.test
        if isinstance(test, cst.Call) and call_name(test) == self.guard and test.args \
                and dotted(test.args[0].value) == self.subject:
            self.guards.append(node)
        elif self.guards and _is_name_test(test, self.subject):
            self.named.update(strings(test.comparisons[0].comparator) or ())
        return True

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        if self.guards and original_node is self.guards[-1]:
            self.guards.pop()
            return updated_node
        test, orelse = updated_node.test, updated_node.orelse
        if self.added or not self.guards or not isinstance(orelse, cst.Else) or not _is_name_test(test, self.subject) \
                or set(self.classes) <= self.named:
            return updated_node
        names = [cst.Element(cst.SimpleString(f'"{c}"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                 for c in self.classes]
        # a one-element tuple keeps its comma: ("KimiK25ForConditionalGeneration",)
        names[-1] = names[-1].with_changes(comma=cst.Comma() if len(names) == 1 else cst.MaybeSentinel.DEFAULT)
        branch_test = cst.Comparison(left=test.left, comparisons=[cst.ComparisonTarget(cst.In(), cst.Tuple(names))])
        reading = cst.ensure_type(orelse.visit(_ReplaceRead(self.old_read, self.new_read)), cst.Else)
        self.added = True
        return updated_node.with_changes(orelse=cst.If(test=branch_test, body=reading.body, orelse=orelse))


def _is_name_test(test: cst.BaseExpression, subject: str) -> TypeGuard[cst.Comparison]:
    """``<namer>(<subject>) in [...]`` or ``== "..."``: a test of the subject's class name."""
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Call)
            and any(dotted(a.value) == subject for a in test.left.args))


class _ReplaceRead(cst.CSTTransformer):
    """Reads of the dotted name ``old`` read ``new``, in the parentheses the old read had."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if dotted(original_node) != self.old:
            return updated_node
        return cst.parse_expression(self.new).with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)


# -- code a bundle inserts -------------------------------------------------------------------------------


class UnboundName(SpecauditError):
    """The code a bundle inserts uses a name the module it goes into does not bind."""


class _InsertsCode(VisitorBasedCodemodCommand):
    """A codemod that inserts ``functions`` (a bundle's code) into a module: they may use only names the module
    binds, looked up in its global scope (a method sees its own names, the module's and the builtins)."""

    METADATA_DEPENDENCIES = (ScopeProvider,)

    def __init__(self, context: CodemodContext, functions: Sequence[cst.FunctionDef],
                 imports: Sequence[ImportItem] = ()) -> None:
        super().__init__(context)
        self.functions, self.imports = list(functions), list(imports)

    def visit_Module(self, node: cst.Module) -> bool:
        module_scope = cst.ensure_type(self.get_metadata(ScopeProvider, node), GlobalScope)
        imported = {item.alias or item.obj_name or item.module for item in self.imports}
        for function in self.functions:
            unbound = sorted(name for name in _free_names(function) if name not in module_scope and name not in imported)
            if unbound:
                raise UnboundName(f"{function.name.value} uses {unbound[0]}, which {_file(self.context)} does not bind")
        return True


def _free_names(function: cst.FunctionDef) -> set[str]:
    """The names a function reads that neither it nor the builtins bind. Resolved in a module of its own, whose
    one global binding is the function itself (which, as a method, it does not see)."""
    scopes = MetadataWrapper(cst.Module(body=[function])).resolve(ScopeProvider)
    return {access.node.value for scope in set(scopes.values()) if scope is not None for access in scope.accesses
            if isinstance(access.node, cst.Name)  # not a string annotation: those are never evaluated
            and all(isinstance(assignment.scope, GlobalScope) for assignment in access.referents)}


def _template(change: Change) -> cst.Module:
    path = (change.bundle_dir / change.args["code"]).resolve()
    try:
        return cst.parse_module(path.read_text(encoding="utf-8"))
    except (OSError, cst.ParserSyntaxError) as exc:
        raise SpecauditError(f"{path}: cannot read the bundle's code ({exc})") from None


def _template_functions(change: Change) -> dict[str, cst.FunctionDef]:
    return {stmt.name.value: stmt.with_changes(leading_lines=[]) for stmt in _template(change).body
            if isinstance(stmt, cst.FunctionDef)}


def _template_imports(change: Change) -> list[ImportItem]:
    """The ``from X import Y`` lines of the bundle's code: added to the module where it does not bind Y."""
    if "code" not in change.args:
        return []
    return [ImportItem(cst.Module([]).code_for_node(node.module), alias.evaluated_name, alias.evaluated_alias)
            for stmt in _template(change).body if isinstance(stmt, cst.SimpleStatementLine)
            for node in stmt.body if isinstance(node, cst.ImportFrom) and node.module is not None
            and not isinstance(node.names, cst.ImportStar) for alias in node.names]


# -- implement_protocol --------------------------------------------------------------------------------


@_whole
def implement_protocol(change: Change, context: PatchContext) -> str | None:
    """Make a class satisfy a protocol: the protocol as a base, and the members the release's protocol has
    that the class lacks, from the bundle's code file. Without a protocol (SGLang has none), the code file's
    members the class lacks anywhere in its MRO. ``aliases``: properties for the parts the engine's code reads
    under another name than the class holds them by."""
    cls = context.find_class(change.args["class"])
    if cls is None:
        return f"this release has no class {change.args['class']}"
    members = _template_functions(change) if "code" in change.args else {}
    resolver = next(iter(context.judges.values())).resolver
    protocol = context.protocols.get(change.args["protocol"]) if "protocol" in change.args else None
    if "protocol" in change.args and protocol is None:
        return f"this release has no protocol {change.args['protocol']}"
    if protocol is not None and resolver.conformance(cls, protocol).conforms:
        return f"{cls.name} already satisfies {protocol.cls.name}"
    if protocol is not None:
        wanted = [members[name] for name in protocol.members if name in members]
    else:
        wanted = [f for name, f in members.items() if resolver.method_node(cls, name) is None]
        if not wanted:
            return f"{cls.name} already has {', '.join(members)}"
    aliases = alias_properties(change.args.get("aliases") or {}, cls.name)
    _edit(context, context.path_of(cls), functools.partial(
        ImplementProtocol, class_name=cls.name, protocol=protocol.cls.name if protocol else None,
        protocol_module=protocol.cls.module if protocol else None, members=[*wanted, *aliases],
        imports=_template_imports(change)))
    return None


class ImplementProtocol(_InsertsCode):
    """The class ``class_name`` gets ``protocol`` as its last base, and those of ``members`` its body does not
    bind. Where the module does not bind the protocol's name, it is imported from ``protocol_module``: beside
    the module's other names from that module (as isort orders them), else in a new import after the others."""

    def __init__(self, context: CodemodContext, class_name: str, protocol: str | None, protocol_module: str | None,
                 members: Sequence[cst.FunctionDef], imports: Sequence[ImportItem] = ()) -> None:
        super().__init__(context, members, imports)
        self.class_name, self.protocol, self.protocol_module = class_name, protocol, protocol_module
        self.found = self.changed = False

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        edited = super().transform_module_impl(tree)
        if not self.found:
            raise SkipFile(f"{_file(self.context)} has no class {self.class_name}")
        if not self.changed:
            raise SkipFile(f"{self.class_name} already has {self.protocol or 'the members'} as a base and its members")
        scope = cst.ensure_type(self.get_metadata(ScopeProvider, tree), GlobalScope)
        protocol = [ImportItem(self.protocol_module, self.protocol)] if self.protocol and self.protocol_module else []
        wanted = [*self.imports, *protocol]
        missing = [item for item in wanted if (item.alias or item.obj_name or item.module) not in scope]
        return edited.visit(AddImports(self.context, missing)) if missing else edited

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node.name.value != self.class_name:
            return updated_node
        self.found = True
        class_scope = cst.ensure_type(self.get_metadata(ScopeProvider, original_node.body.body[0]), ClassScope)
        missing = [f for f in self.functions if not class_scope.assignments[f.name.value]]
        bases = list(updated_node.bases)
        if self.protocol and not any(dotted(arg.value) == self.protocol for arg in bases):
            bases = inserted(bases, [cst.Arg(cst.Name(self.protocol))], len(bases))
        self.changed = len(bases) > len(updated_node.bases) or bool(missing)
        return updated_node.with_changes(bases=bases, body=appended(updated_node.body, missing))


# -- collect_aux_hidden_states -------------------------------------------------------------------------


@_whole
def collect_aux_hidden_states(change: Change, context: PatchContext) -> str | None:
    """Make a decoder stack's forward collect the residual stream entering the configured aux layers and
    return it beside the final hidden states (and pass it between pipeline stages): with the bundle's code, as
    LlamaModel does; with ``like`` (a stack the release supports), as that class's own forward does, its
    statements moved into the target's (transplant.py), and where its layer call hands its layers the means to
    capture, the target's decoder layer made to take it as the donor's does (derive.layer_plan)."""
    if "like" in change.args:
        return _collect_like(change, context)
    owner = context.find_class(change.args["for_class"])
    protocol = context.protocols.get(change.args["protocol"])
    if owner is None or protocol is None:
        return f"this release has no {change.args['for_class']} or no {change.args['protocol']}"
    if next(iter(context.judges.values())).resolver.conformance(owner, protocol).conforms:
        return f"{owner.name} already satisfies {protocol.cls.name}"
    cls = context.find_class(change.args["class"], near=owner)
    if cls is None:
        return f"this release has no class {change.args['class']}"
    _edit(context, context.path_of(cls), functools.partial(
        CollectAuxHiddenStates, class_name=cls.name, helpers=list(_template_functions(change).values())))
    return None


def _collect_like(change: Change, context: PatchContext) -> str | None:
    cls, donor = context.find_class(change.args["class"]), context.find_qualname(change.args["like"])
    if cls is None or donor is None:
        return f"this release has no {change.args['class']} or no {change.args['like']}"
    parts = stack_parts(context.index, context.resolver, donor)
    if isinstance(parts, str):
        return parts
    layers = layer_plan(context.index, context.resolver, donor, cls, parts.capture)
    if isinstance(layers, str):
        return layers
    named = change.args.get("layer")
    if (layers.layer.qualname if layers.layer else None) != named:
        return (f"{cls.name}'s layers take the capture in {layers.layer.name if layers.layer else 'no class'} "
                f"of this release, where the bundle edits {named or 'none'}")
    if layers.layer is not None and layers.taken is not None:  # the layers take the capture in their call
        _edit(context, context.path_of(layers.layer), functools.partial(
            ThreadLayerCapture, class_name=layers.layer.name, taken=layers.taken, imports=layers.imports))
    _edit(context, context.path_of(cls), functools.partial(
        TransplantAuxCapture, class_name=cls.name, capture=layers.capture, bases=parts.bases,
        attributes=parts.attributes, init=parts.init, aliases=change.args.get("aliases") or {}, imports=parts.imports))
    return None


@_whole
def pass_aux_hidden_states(change: Change, context: PatchContext) -> str | None:
    """Make a causal LM hand the aux hidden states its stack returns on as ``like`` (a causal LM the release
    supports) does: SGLang's unpacking of the stack's output and the logits processor's aux argument."""
    cls, donor = context.find_class(change.args["class"]), context.find_qualname(change.args["like"])
    if cls is None or donor is None:
        return f"this release has no {change.args['class']} or no {change.args['like']}"
    parts = causal_parts(context.index, donor, change.args["like_stack"])
    if not isinstance(parts, CausalParts):
        return parts or f"{donor.name} hands its stack's output on as it is"
    _edit(context, context.path_of(cls), functools.partial(
        PassAuxToLogits, class_name=cls.name, stack=change.args["stack"], after_call=parts.after_call,
        processor=parts.processor, argument=parts.argument, position=parts.position, init=parts.init,
        imports=parts.imports))
    return None


_SELF_AUX_LAYERS = m.Attribute(value=m.Name("self"), attr=m.Name("aux_hidden_state_layers"))
_LAYER_LOOP = m.For(iter=m.Call(func=m.Name("islice") | m.Attribute(attr=m.Name("islice")),
                                args=[m.Arg(m.Attribute(value=m.Name("self"), attr=m.Name("layers"))), m.ZeroOrMore()]))
_RETURN = m.SimpleStatementLine(body=[m.Return()])


class CollectAuxHiddenStates(_InsertsCode):
    """The decoder stack ``class_name`` collects the residual stream entering its aux layers: ``__init__`` sets
    ``self.aux_hidden_state_layers``; forward's ``for layer in islice(self.layers, ...)`` loop fills one slot per
    aux layer, starting from the slots an earlier pipeline stage sent; the ``IntermediateTensors({...})`` it
    sends to the next stage carries them; and its last return gives them beside the final hidden states when
    layers are asked for. ``helpers`` (the bundle's methods that code calls) are added to the class."""

    def __init__(self, context: CodemodContext, class_name: str, helpers: Sequence[cst.FunctionDef]) -> None:
        super().__init__(context, helpers)
        self.class_name = class_name
        self.found = False

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        edited = super().transform_module_impl(tree)
        if not self.found:
            raise SkipFile(f"{_file(self.context)} has no class {self.class_name}")
        return edited

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node.name.value != self.class_name:
            return updated_node
        self.found = True
        methods = {s.name.value: s for s in updated_node.body.body if isinstance(s, cst.FunctionDef)}
        init, forward = methods.get("__init__"), methods.get("forward")
        if init is None or forward is None:
            raise SkipFile(f"{self.class_name} has no __init__ or no forward")
        if m.findall(init, m.AssignTarget(target=_SELF_AUX_LAYERS) | m.AnnAssign(target=_SELF_AUX_LAYERS)):
            raise SkipFile(f"{self.class_name} already collects aux hidden states")
        layers = cst.parse_statement("self.aux_hidden_state_layers = tuple[int, ...]()\n")
        init_layers = init.with_changes(body=init.body.with_changes(body=[*init.body.body, layers]))
        body = [init_layers if s is init else self._forward(forward) if s is forward else s for s in updated_node.body.body]
        return updated_node.with_changes(body=appended(updated_node.body.with_changes(body=body), self.functions))

    def _forward(self, function: cst.FunctionDef) -> cst.FunctionDef:
        statements = list(function.body.body)
        loop = next((i for i, s in enumerate(statements) if m.matches(s, _LAYER_LOOP)), None)
        returns = [i for i, s in enumerate(statements) if m.matches(s, _RETURN)]
        if loop is None or not returns or returns[-1] < loop:
            raise SkipFile(f"{self.class_name}.forward has no `for layer in islice(self.layers, ...)` loop followed by a "
                           "return")
        old = cst.ensure_type(statements[loop], cst.For)
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
                      + statements[loop + 1:returns[-1]] + [returning] + statements[returns[-1]:])
        sent = _SendAux()
        function = cst.ensure_type(function.with_changes(body=function.body.with_changes(body=statements)).visit(sent),
                                   cst.FunctionDef)
        if not sent.done:
            raise SkipFile(f"{self.class_name}.forward builds no IntermediateTensors({{...}}) for the next stage")
        return function


class _SendAux(cst.CSTTransformer):
    """``IntermediateTensors({"hidden_states": ..., "residual": ...})`` also carries the aux hidden states."""

    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if call_name(original_node) != "IntermediateTensors" or not updated_node.args \
                or not isinstance(updated_node.args[0].value, cst.Dict):
            return updated_node
        mapping = updated_node.args[0].value
        elements = list(mapping.elements)
        elements[-1] = elements[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(cst.StarredDictElement(cst.parse_expression(
            "self._aux_intermediate_tensors(aux_hidden_states, hidden_states)")))
        self.done = True
        return updated_node.with_changes(args=[updated_node.args[0].with_changes(value=mapping.with_changes(elements=elements))])


CODEMODS: dict[str, ChangeApply] = {
    "extend_allowlist": extend_allowlist,
    "add_dispatch_branch": add_dispatch_branch,
    "implement_protocol": implement_protocol,
    "collect_aux_hidden_states": collect_aux_hidden_states,
    "pass_aux_hidden_states": pass_aux_hidden_states,
}
