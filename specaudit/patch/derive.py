"""What a class the release supports for EAGLE-3 gives a target of its shape, read from the release's own code:
its decoder stack's aux capture with the bases, class attributes and ``__init__`` statements it reads
(StackParts), its causal LM's handing of the aux states to the logits (CausalParts), the names the engine's
EAGLE-3 code reaches its parts by (aliases), and the imports the moved code needs in the target's module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import ImportItem

from ..core.errors import SpecauditError
from ..scan.facts import ClassInfo, ModuleInfo
from ..scan.index import TreeIndex
from ..scan.match import dotted
from ..scan.resolve import Resolver
from .layout import one_line
from .shape import (
    AuxCapture,
    LayerCapture,
    LayerLoop,
    calls_of,
    captured_at_entry,
    functions,
    read_capture,
    read_layer_capture,
    read_loop,
    self_attributes,
    statements,
)
from .transplant import free_names


@dataclass(frozen=True)
class StackParts:
    capture: AuxCapture
    bases: tuple[str, ...]  # the donor's bases that give what its capture reads (vLLM's EagleModelMixin)
    attributes: tuple[cst.BaseStatement, ...]  # its class attributes those bases declare
    init: tuple[cst.BaseStatement, ...]  # its __init__ statements setting what the capture reads (layers_to_capture)
    imports: tuple[ImportItem, ...]


@dataclass(frozen=True)
class CausalParts:
    stack: str  # the attribute its forward calls the decoder stack by
    after_call: tuple[cst.BaseStatement, ...]  # what it does with the aux states the stack returns
    processor: str  # the attribute it passes them to (logits_processor)
    argument: cst.Arg
    position: int
    init: tuple[cst.BaseStatement, ...]
    imports: tuple[ImportItem, ...]


@functools.lru_cache(maxsize=64)
def _parsed(source: str) -> cst.Module:
    """A module's libcst tree, parsed once: a synthesis reads the same few model files over and over (libcst trees are
    immutable, so one is shared safely)."""
    return cst.parse_module(source)


def class_node(index: TreeIndex, cls: ClassInfo) -> tuple[ModuleInfo, cst.ClassDef]:
    info = index.module(cls.module)
    if info is None:
        raise SpecauditError(f"{cls.module} is not in the index of {index.tree.root}")
    module = _parsed(index.source(info.path))
    node = next((s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == cls.name), None)
    if node is None:
        raise SpecauditError(f"{cls.qualname}: not a top-level class of {info.path}")
    return info, node


def stack_parts(index: TreeIndex, resolver: Resolver, donor: ClassInfo) -> StackParts | str:
    """What the donor's decoder stack does to collect the aux hidden states, or why it has no shape to move."""
    info, node = class_node(index, donor)
    forward = functions(node).get("forward")
    if forward is None:
        return f"{donor.name} has no forward"
    capture = read_capture(forward)
    if isinstance(capture, str):
        return f"{donor.name}.forward: {capture}"
    giving = [(dotted, base) for dotted in donor.bases if dotted
              if isinstance(base := resolver.resolve(info, dotted), ClassInfo)
              and (base.bound | base.annotated) & capture.self_reads]
    provided = {name for _, base in giving for name in base.bound | base.annotated}
    attributes = tuple(s for s in node.body.body if isinstance(s, cst.SimpleStatementLine)
                       and any(_assigns(s, name) for name in provided))
    init = _init_setting(node, capture.self_reads - provided)
    moved = [*capture.before_loop, *capture.loop_head, *capture.loop_tail, *capture.sent, *capture.after_loop,
             *capture.threaded, *attributes, *init]
    names = free_names(moved, set(capture.names) | _forward_locals(forward)) | {dotted for dotted, _ in giving}
    imports = _imports(info, names)
    if isinstance(imports, str):
        return imports
    return StackParts(capture, tuple(dotted for dotted, _ in giving), attributes, init, imports)


@dataclass(frozen=True)
class LayerPlan:
    """Where the target's layers take the capture the donor's stack threads into its layer call."""

    capture: AuxCapture  # the stack's capture to move: its threaded arguments kept, or made a capture at each layer's entry
    layer: ClassInfo | None  # the target's decoder layer, to take the threaded arguments as the donor's layer does
    taken: LayerCapture | None  # how the donor's layer takes them
    imports: tuple[ImportItem, ...]


def layer_plan(index: TreeIndex, resolver: Resolver, donor: ClassInfo, target: ClassInfo,
               capture: AuxCapture) -> LayerPlan | str:
    """How the target stack's layers take what the donor's stack hands its layers to capture with, or why they
    cannot. Where the donor threads nothing, nothing. Where the target's decoder layer makes the calls the donor's
    layer hands the capture to (SGLang 0.5.23's ``self.attn_boundary.prepare(...)``), it takes it the same way.
    Where it has none of them and keeps its residual stream in the hidden states it is called with and returns
    (GPT-2's blocks: no residual in the layer call, no boundary), that stream is what enters the layer, which the
    donor's layer captures at its entry: the stack captures it before the layer call instead, under the condition
    and with the callable the donor's stack threads (``if i in self.layers_to_capture:
    aux_hidden_states.capture(hidden_states)``)."""
    if not capture.threaded:
        return LayerPlan(capture, None, None, ())
    keywords = tuple(cst.ensure_type(a.keyword, cst.Name).value for a in capture.threaded)
    donor_side, target_side = _layer_of(index, resolver, donor), _layer_of(index, resolver, target)
    if isinstance(donor_side, str):
        return donor_side
    if isinstance(target_side, str):
        return target_side
    (donor_layer, donor_forward), (layer, forward) = donor_side, target_side
    taken = read_layer_capture(donor_forward, keywords)
    if isinstance(taken, str):
        return f"{donor_layer.name}.forward: {taken}"
    missing = [s for s in taken.sinks if len(calls_of(forward, s.call)) <= s.occurrence]
    if not missing:
        bound = {p.name.value for p in [*forward.params.params, *forward.params.kwonly_params]}
        names = free_names([*taken.params, *(s.argument for s in taken.sinks)], bound | set(keywords))
        imports = _imports(class_node(index, donor_layer)[0], names)
        return imports if isinstance(imports, str) else LayerPlan(capture, layer, taken, imports)
    sink = missing[0]
    code = cst.Module([]).code_for_node(one_line(sink.argument).with_changes(
        comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace("")))
    refused = f"{layer.name}.forward makes no {sink.call}(...) call to pass {code} to, as {donor_layer.name}'s does"
    # the parts of the donor's layer it hands the capture to (self.attn_boundary): where the target's layer holds one
    # too, its stream goes through it and the capture must as well; where it holds none, its stream is its own
    owners = {s.call.rpartition(".")[0] for s in taken.sinks}
    parts = {o.partition(".")[2] for o in owners if o.startswith("self.") and o.count(".") == 1}
    holds = sorted(parts & self_attributes(class_node(index, layer)[1]))
    target_loop = read_loop(functions(class_node(index, target)[1])["forward"])
    if holds:
        return f"{refused} (it holds self.{', self.'.join(holds)})"
    if len(parts) != len(owners) or not all(s.takes_entry for s in taken.sinks):
        return f"{refused}, which captures what its layer computes, not what enters it"
    if not isinstance(target_loop, LayerLoop) or target_loop.residual is not None:
        return (f"{refused}, and its layer call returns a residual beside the hidden states: what enters a layer is not "
                "the hidden states alone")
    at_entry = captured_at_entry(capture)
    return refused if isinstance(at_entry, str) else LayerPlan(at_entry, None, None, ())


def _layer_of(index: TreeIndex, resolver: Resolver, stack: ClassInfo) -> tuple[ClassInfo, cst.FunctionDef] | str:
    """The decoder layer class a stack builds its layers of: the first class of the tree with a forward that its
    ``__init__`` constructs in what it assigns to ``self.<layers>`` (``make_pp_layers(..., lambda idx, prefix:
    LlamaDecoderLayer(...))``, ``nn.ModuleList([GPT2Block(...) for i in ...])``)."""
    info, node = class_node(index, stack)
    forward, init = functions(node).get("forward"), functions(node).get("__init__")
    loop = read_loop(forward) if forward is not None else "no forward"
    if isinstance(loop, str) or init is None:
        return f"{stack.name}: no layer loop and __init__ to read its layers' class from"
    layers = m.Attribute(value=m.Name("self"), attr=m.Name(loop.layers))
    for assign in m.findall(init, m.Assign()):
        assigned = cst.ensure_type(assign, cst.Assign)
        if not any(m.findall(t.target, layers) for t in assigned.targets):
            continue
        for call in m.findall(assigned.value, m.Call()):
            for name in _named_by(init, dotted(cst.ensure_type(call, cst.Call).func)):
                built = resolver.resolve(info, name)
                if isinstance(built, ClassInfo):
                    layer_forward = functions(class_node(index, built)[1]).get("forward")
                    if layer_forward is not None:
                        return built, layer_forward
    return f"{stack.name}.__init__ builds self.{loop.layers} of no class of the tree with a forward"


def _named_by(init: cst.FunctionDef, name: str | None) -> list[str]:
    """What a callee of ``__init__`` names: itself, and where it is a local or a parameter, the names its assignments
    and its default read (``decoder_layer_type = decoder_layer_type or Glm4DecoderLayer``)."""
    if name is None:
        return []
    values = [cst.ensure_type(a, cst.Assign).value for a in m.findall(init, m.Assign([m.AssignTarget(m.Name(name))]))]
    values += [p.default for p in [*init.params.params, *init.params.kwonly_params]
               if p.name.value == name and p.default is not None]
    return [name, *(cst.ensure_type(n, cst.Name).value for v in values for n in m.findall(v, m.Name()))]


def causal_parts(index: TreeIndex, donor: ClassInfo, stack: str) -> CausalParts | None | str:
    """What the donor's causal LM does with the aux states its stack returns (SGLang's: unpacks them and passes them
    to the logits processor), None where it passes its stack's output on as it is (vLLM's), or why it cannot move."""
    info, node = class_node(index, donor)
    forward = functions(node).get("forward")
    if forward is None:
        return f"{donor.name} has no forward"
    body = statements(forward)
    call = next((i for i, s in enumerate(body) if _calls_self(s, stack)), None)
    if call is None:
        return f"{donor.name}.forward does not call self.{stack}(...)"
    assigned_after = {n for s in body[call + 1:] for n in _assigned_names(s)} - _assigned_names(body[call])
    for found in m.findall(forward, m.Call(func=m.Attribute(value=m.Name("self")))):
        processor_call = cst.ensure_type(found, cst.Call)
        for position, arg in enumerate(processor_call.args):
            if isinstance(arg.value, cst.Name) and arg.value.value in assigned_after and arg.keyword is None:
                aux = arg.value.value
                after = tuple(s for s in body[call + 1:] if aux in _assigned_names(s))
                processor = cst.ensure_type(processor_call.func, cst.Attribute).attr.value
                reads = {a for s in after for a in self_attributes(s)}
                init = _init_setting(node, reads)
                imports = _imports(info, free_names([*after, *init], _forward_locals(forward)))
                if isinstance(imports, str):
                    return imports
                return CausalParts(stack, after, processor, arg.with_changes(comma=cst.MaybeSentinel.DEFAULT),
                                   position, init, imports)
    return None


def member_imports(index: TreeIndex, donor: ClassInfo, members: list[cst.FunctionDef]) -> tuple[ImportItem, ...] | str:
    """The imports the donor's methods need wherever they are moved: the donor module's own, for the names they read."""
    info, _ = class_node(index, donor)
    names = set()
    for function in members:
        params = {p.name.value for p in function.params.params}
        names |= free_names([function.params, function.body, *function.decorators], params)
    return _imports(info, names)


def _imports(info: ModuleInfo, names: set[str]) -> tuple[ImportItem, ...] | str:
    items = []
    for name in sorted(names):
        imported = info.imports.get(name)
        if imported is not None and imported.name is not None:
            items.append(ImportItem(imported.module, imported.name, None if imported.name == name else name))
        elif imported is not None:
            items.append(ImportItem(imported.module, None, None))
        elif name in info.classes or name in info.functions or name in info.literals or name in info.computed:
            items.append(ImportItem(info.name, name))
        else:
            return f"the code to move reads {name}, which {info.name} neither imports nor defines"
    return tuple(items)


def _init_setting(node: cst.ClassDef, attributes: set[str] | frozenset[str]) -> tuple[cst.BaseStatement, ...]:
    init = functions(node).get("__init__")
    if init is None:
        return ()
    return tuple(s for s in statements(init) if isinstance(s, cst.SimpleStatementLine)
                 and any(m.matches(s, m.SimpleStatementLine([m.Assign([m.AssignTarget(
                     m.Attribute(value=m.Name("self"), attr=m.Name(a)))])])) for a in attributes))


def _assigns(statement: cst.SimpleStatementLine, name: str) -> bool:
    return m.matches(statement, m.SimpleStatementLine([m.Assign([m.AssignTarget(m.Name(name))]) | m.AnnAssign(m.Name(name))]))


def _assigned_names(statement: cst.CSTNode) -> set[str]:
    return {cst.ensure_type(n, cst.Name).value for t in m.findall(statement, m.AssignTarget())
            for n in m.findall(cst.ensure_type(t, cst.AssignTarget).target, m.Name())}


def _forward_locals(forward: cst.FunctionDef) -> set[str]:
    params = {p.name.value for p in [*forward.params.params, *forward.params.kwonly_params]}
    return params | _assigned_names(forward) | {cst.ensure_type(n, cst.Name).value for f in m.findall(forward, m.For())
                                                for n in m.findall(cst.ensure_type(f, cst.For).target, m.Name())}


def _calls_self(statement: cst.CSTNode, attribute: str) -> bool:
    return bool(m.findall(statement, m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(attribute)))))
