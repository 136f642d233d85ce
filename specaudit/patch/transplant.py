"""Codemods that move what a class the release supports does for EAGLE-3 into a class of the same shape: the
statements its decoder stack's forward collects the aux hidden states with (shape.AuxCapture), renamed to the
target's names; the bases and class attributes those statements need; what its causal LM's forward does with
them; and, where the target holds a part under another name than the code that reads it expects (GPT-2's
``transformer``, ``h``, ``wte``), a property of that name.

Each is a libcst codemod (unit-tested with ``CodemodTest``): it edits one module or raises ``SkipFile`` with why.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import cast

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.codemod.visitors import ImportItem
from libcst.metadata import GlobalScope, ScopeProvider

from ..scan.match import call_name
from .layout import AddImports, appended, inserted, with_arguments
from .shape import STAGE_TENSORS, AuxCapture, LayerCapture, LayerLoop, Sink, calls_of, functions, read_loop, statements

_BUILTINS = frozenset(dir(builtins)) | {"self"}


class Renamer(cst.CSTTransformer):
    """The donor's names for the loop's parts read as the target's: its hidden states, residual, layer index and
    layer, and ``self.<layers>``. Where the target's layers return no residual, the residual stream entering a
    layer is the hidden states alone: ``hidden_states + residual`` reads ``hidden_states``, a lone ``residual``
    reads ``None``."""

    def __init__(self, donor: LayerLoop, target: LayerLoop) -> None:
        super().__init__()
        self.names = {donor.hidden: target.hidden}
        if donor.index and target.index:
            self.names[donor.index] = target.index
        if donor.layer and target.layer:
            self.names[donor.layer] = target.layer
        if donor.residual and target.residual:
            self.names[donor.residual] = target.residual
        self.dropped = donor.residual if donor.residual and not target.residual else None
        self.layers = (donor.layers, target.layers)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False  # only its value is renamed (below), never the attribute's own name

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if m.matches(original_node, m.Attribute(value=m.Name("self"), attr=m.Name(self.layers[0]))):
            return updated_node.with_changes(attr=cst.Name(self.layers[1]))
        return updated_node.with_changes(value=updated_node.value.visit(self))

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        if self.dropped and isinstance(original_node.operator, cst.Add):
            sides = [original_node.left, original_node.right]
            residual = [s for s in sides if m.matches(s, m.Name(self.dropped))]
            if residual:
                kept = updated_node.right if residual[0] is original_node.left else updated_node.left
                return kept.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return updated_node

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if original_node.value == self.dropped:
            return cst.Name("None")
        return updated_node.with_changes(value=self.names.get(original_node.value, original_node.value))


def free_names(nodes: Sequence[cst.CSTNode], bound: set[str]) -> set[str]:
    """The names moved code reads that neither it (``bound``: the function's locals) nor the builtins bind."""
    reads = _Reads()
    for node in nodes:
        node.visit(reads)
    read = reads.names
    targets = [t.target for node in nodes for t in m.findall(node, m.AssignTarget() | m.AnnAssign() | m.CompFor() | m.For())
               if isinstance(t, cst.AssignTarget | cst.AnnAssign | cst.CompFor | cst.For)]
    assigned = {n.value for target in targets for n in m.findall(target, m.Name()) if isinstance(n, cst.Name)}
    return read - bound - assigned - _BUILTINS


class _Reads(cst.CSTVisitor):
    """The names code reads: not an attribute's own name, a keyword argument's or a parameter's."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        for part in (node.annotation, node.default):
            if part is not None:
                part.visit(self)
        return False


def alias_properties(aliases: Mapping[str, str], owner: str) -> list[cst.FunctionDef]:
    """A property per name the EAGLE-3 code reads that the class holds under another name."""
    return [cst.ensure_type(cst.parse_statement(
        f"@property\ndef {name}(self):\n"
        f"    # EAGLE-3's code reads .{name}; {owner} holds it as .{held}\n"
        f"    return self.{held}\n"), cst.FunctionDef) for name, held in aliases.items()]


class _ClassEdit(VisitorBasedCodemodCommand):
    """An edit of one class of the module, with the imports the moved code needs."""

    METADATA_DEPENDENCIES = (ScopeProvider,)

    def __init__(self, context: CodemodContext, class_name: str, imports: Sequence[ImportItem]) -> None:
        super().__init__(context)
        self.class_name, self.imports = class_name, list(imports)
        self.found = False

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        scope = cst.ensure_type(self.get_metadata(ScopeProvider, tree), GlobalScope)  # before: what the module binds
        edited = super().transform_module_impl(tree)
        if not self.found:
            raise SkipFile(f"{self.context.filename} has no class {self.class_name}")
        missing = [item for item in self.imports if (item.alias or item.obj_name or item.module) not in scope]
        return edited.visit(AddImports(self.context, missing)) if missing else edited

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node.name.value != self.class_name:
            return updated_node
        self.found = True
        return self.edit(updated_node)

    def edit(self, cls: cst.ClassDef) -> cst.ClassDef:
        raise NotImplementedError


def _with_bases(cls: cst.ClassDef, bases: Sequence[str]) -> cst.ClassDef:
    have = {m_.value.value for m_ in cls.bases if isinstance(m_.value, cst.Name)}
    new = [cst.Arg(cst.Name(b)) for b in bases if b not in have]
    return cls.with_changes(bases=inserted(list(cls.bases), new, len(cls.bases))) if new else cls


def _with_members(cls: cst.ClassDef, leading: Sequence[cst.BaseStatement], methods: Sequence[cst.FunctionDef]) -> cst.ClassDef:
    """Class attributes first (after the docstring and the class's own attributes), methods at the end."""
    body = list(cls.body.body)
    first_method = next((i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef)), len(body))
    body = body[:first_method] + list(leading) + body[first_method:]
    return cls.with_changes(body=appended(cls.body.with_changes(body=body), methods))


def _with_init(cls: cst.ClassDef, added: Sequence[cst.BaseStatement]) -> cst.ClassDef:
    if not added:
        return cls
    init = functions(cls).get("__init__")
    if init is None:
        raise SkipFile(f"{cls.name.value} has no __init__ to set {', '.join(_code(s) for s in added)} in")
    new_init = init.with_changes(body=init.body.with_changes(body=[*statements(init), *added]))
    return cls.with_changes(body=cls.body.with_changes(body=[new_init if s is init else s for s in cls.body.body]))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


class TransplantAuxCapture(_ClassEdit):
    """The decoder stack ``class_name`` collects the aux hidden states as the donor does (``capture``): the donor's
    statements before its layer loop, in it (before and after the layer call), in what it sends the next pipeline
    stage and after the loop, renamed to the target's names; its loop header where the target's loop binds no
    layer index; ``bases``, ``attributes`` (class level) and ``init`` (``__init__``) where the statements read them;
    ``aliases`` as properties."""

    def __init__(self, context: CodemodContext, class_name: str, capture: AuxCapture, bases: Sequence[str],
                 attributes: Sequence[cst.BaseStatement], init: Sequence[cst.BaseStatement],
                 aliases: Mapping[str, str], imports: Sequence[ImportItem]) -> None:
        super().__init__(context, class_name, imports)
        self.capture, self.bases, self.attributes, self.init = capture, bases, attributes, init
        self.aliases = aliases

    def edit(self, cls: cst.ClassDef) -> cst.ClassDef:
        forward = functions(cls).get("forward")
        if forward is None:
            raise SkipFile(f"{self.class_name} has no forward")
        if any(m.findall(forward, m.Name(n)) for n in self.capture.names):
            raise SkipFile(f"{self.class_name}.forward already collects aux hidden states")
        new_forward = transplanted_forward(forward, self.capture, self.class_name)
        cls = cls.with_changes(body=cls.body.with_changes(
            body=[new_forward if s is forward else s for s in cls.body.body]))
        cls = _with_init(_with_bases(cls, self.bases), self.init)
        have = set(functions(cls))
        return _with_members(cls, self.attributes, alias_properties(
            {k: v for k, v in self.aliases.items() if k not in have}, self.class_name))


def transplanted_forward(forward: cst.FunctionDef, capture: AuxCapture, class_name: str) -> cst.FunctionDef:
    loop = read_loop(forward)
    if isinstance(loop, str):
        raise SkipFile(f"{class_name}.forward: {loop}")
    if loop.kind != capture.loop.kind:
        raise SkipFile(f"{class_name}.forward loops {loop.describe()}; the donor {capture.loop.describe()}")
    rename = Renamer(capture.loop, loop)
    body = statements(forward)
    final = len(body) - 1
    if not m.matches(body[final], m.SimpleStatementLine([m.Return()])):
        raise SkipFile(f"{class_name}.forward does not end in a return")
    old = cst.ensure_type(body[loop.at], cst.For)
    loop_body = list(cst.ensure_type(old.body, cst.IndentedBlock).body)
    if capture.threaded:  # the layer call hands the layer the means to capture, as the donor's does
        loop_body[loop.call] = _threaded(loop_body[loop.call], [
            a.with_changes(value=a.value.visit(rename)) for a in capture.threaded])
    new_loop_body = ([_renamed(s, rename) for s in capture.loop_head] + loop_body[:loop.call + 1]
                     + [_renamed(s, rename) for s in capture.loop_tail] + loop_body[loop.call + 1:])
    new_loop = old.with_changes(body=old.body.with_changes(body=new_loop_body))
    if capture.loop.index and not loop.index:  # the donor's header gives the layer index its statements read
        new_loop = _indexed(new_loop, capture.header, rename)
    before = [_renamed(s, rename) for s in capture.before_loop]
    if before:
        before[0] = before[0].with_changes(leading_lines=old.leading_lines)
        new_loop = new_loop.with_changes(leading_lines=[])
    middle = body[loop.at + 1:final]
    if capture.sent:
        sender = _SendMore([cast(cst.BaseDictElement, e.visit(rename)) for e in capture.sent])
        middle = [cast(cst.BaseStatement, s.visit(sender)) for s in middle]
        if not sender.done:
            raise SkipFile(f"{class_name}.forward sends the next pipeline stage no {' or '.join(STAGE_TENSORS)}({{...}}) "
                           "that the aux hidden states could join (a pipeline layout this cannot follow)")
    after = [_renamed(s, rename) for s in capture.after_loop]
    tail = [] if capture.ends_in_aux_return else [body[final]]
    returned = cst.ensure_type(cst.ensure_type(body[final], cst.SimpleStatementLine).body[0], cst.Return).value
    if after and returned is not None and not m.matches(returned, m.Name(loop.hidden)):
        # `return self.norm(...)`: what the donor's statements after the loop return is the hidden states it makes
        held = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(loop.hidden))], returned)],
                                       leading_lines=cst.ensure_type(body[final], cst.SimpleStatementLine).leading_lines)
        after = [held, *after]
        tail = [] if capture.ends_in_aux_return else [cst.SimpleStatementLine([cst.Return(cst.Name(loop.hidden))])]
    statements_ = [*body[:loop.at], *before, new_loop, *middle, *after, *tail]
    return forward.with_changes(body=forward.body.with_changes(body=statements_))


def _threaded(statement: cst.BaseStatement, arguments: Sequence[cst.Arg]) -> cst.BaseStatement:
    line = cst.ensure_type(statement, cst.SimpleStatementLine)
    assign = cst.ensure_type(line.body[0], cst.Assign)
    call = with_arguments(cst.ensure_type(assign.value, cst.Call), arguments)
    return line.with_changes(body=[assign.with_changes(value=call)])


def _renamed(statement: cst.BaseStatement, rename: Renamer) -> cst.BaseStatement:
    return cast(cst.BaseStatement, statement.visit(rename))


def _indexed(loop: cst.For, header: cst.For, rename: Renamer) -> cst.For:
    """The target's loop, over ``enumerate(<its own iterable>, <the donor's other arguments>)`` and binding the
    donor's index name beside its own layer name."""
    donor = cst.ensure_type(header.iter, cst.Call)
    index = cst.ensure_type(header.target, cst.Tuple).elements[0]
    args = [donor.args[0].with_changes(value=loop.iter), *(a.visit(rename) for a in donor.args[1:])]
    return loop.with_changes(
        target=cst.Tuple([index.with_changes(value=index.value.visit(rename)), cst.Element(loop.target)], lpar=[], rpar=[]),
        iter=donor.with_changes(args=args))


class _SendMore(cst.CSTTransformer):
    """The dict a pipeline stage sends on (``IntermediateTensors({...})``) also carries ``elements``."""

    def __init__(self, elements: Sequence[cst.BaseDictElement]) -> None:
        super().__init__()
        self.elements, self.done = list(elements), False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if call_name(original_node) not in STAGE_TENSORS or not updated_node.args \
                or not isinstance(updated_node.args[0].value, cst.Dict):
            return updated_node
        mapping = updated_node.args[0].value
        elements = list(mapping.elements)
        tail = elements[-1].comma if elements else cst.MaybeSentinel.DEFAULT
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        elements = [e.with_changes(comma=comma) for e in elements] + [e.with_changes(comma=comma) for e in self.elements]
        elements[-1] = elements[-1].with_changes(comma=tail)
        self.done = True
        return updated_node.with_changes(args=[updated_node.args[0].with_changes(value=mapping.with_changes(elements=elements))])


class ThreadLayerCapture(_ClassEdit):
    """The decoder layer ``class_name`` takes the capture its stack now threads into its call, as the donor's layer
    does (``taken``): the donor forward's parameters for it, passed on to the same calls of the forward
    (``self.attn_boundary.prepare(hidden_states, forward_batch, capture=capture_output)``)."""

    def __init__(self, context: CodemodContext, class_name: str, taken: LayerCapture,
                 imports: Sequence[ImportItem]) -> None:
        super().__init__(context, class_name, imports)
        self.taken = taken

    def edit(self, cls: cst.ClassDef) -> cst.ClassDef:
        forward = functions(cls).get("forward")
        if forward is None:
            raise SkipFile(f"{self.class_name} has no forward")
        declared = {p.name.value for p in [*forward.params.params, *forward.params.kwonly_params]}
        taken = [p.name.value for p in self.taken.params if p.name.value in declared]
        if taken:
            raise SkipFile(f"{self.class_name}.forward already takes {', '.join(taken)}")
        params = forward.params.with_changes(params=inserted(
            list(forward.params.params), list(self.taken.params), len(forward.params.params)))
        passer = _PassOn(forward, self.taken)
        new_forward = cast(cst.FunctionDef, forward.visit(passer)).with_changes(params=params)
        if len(passer.done) != len(self.taken.sinks):
            sink = next(s for s in self.taken.sinks if s not in passer.done)
            raise SkipFile(f"{self.class_name}.forward makes no call {sink.occurrence + 1} of {sink.call}(...)")
        return cls.with_changes(body=cls.body.with_changes(
            body=[new_forward if s is forward else s for s in cls.body.body]))


class _PassOn(cst.CSTTransformer):
    def __init__(self, forward: cst.FunctionDef, taken: LayerCapture) -> None:
        super().__init__()
        self.at = [(calls_of(forward, s.call)[s.occurrence], s) for s in taken.sinks
                   if len(calls_of(forward, s.call)) > s.occurrence]
        self.done: list[Sink] = []

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        sinks = [s for call, s in self.at if call is original_node]
        self.done += sinks
        return with_arguments(updated_node, [s.argument for s in sinks]) if sinks else updated_node


class PassAuxToLogits(_ClassEdit):
    """The causal LM ``class_name`` takes the aux hidden states its stack now returns, as the donor does: the donor
    forward's statements after its call of the stack (``aux_hidden_states = None; if self.capture_aux_hidden_states:
    hidden_states, aux_hidden_states = hidden_states``), the aux argument its ``self.logits_processor(...)`` call
    passes at the same position, and the donor's ``__init__`` statements that set what those read."""

    def __init__(self, context: CodemodContext, class_name: str, stack: str, after_call: Sequence[cst.BaseStatement],
                 processor: str, argument: cst.Arg, position: int, init: Sequence[cst.BaseStatement],
                 imports: Sequence[ImportItem]) -> None:
        super().__init__(context, class_name, imports)
        self.stack, self.after_call, self.processor = stack, after_call, processor
        self.argument, self.position, self.init = argument, position, init

    def edit(self, cls: cst.ClassDef) -> cst.ClassDef:
        forward = functions(cls).get("forward")
        if forward is None:
            raise SkipFile(f"{self.class_name} has no forward")
        body = statements(forward)
        call = next((i for i, s in enumerate(body) if m.findall(s, m.Call(func=m.Attribute(
            value=m.Name("self"), attr=m.Name(self.stack))))), None)
        if call is None:
            raise SkipFile(f"{self.class_name}.forward does not call self.{self.stack}(...)")
        passer = _PassArgument(self.processor, self.argument, self.position)
        rest = [cast(cst.BaseStatement, s.visit(passer)) for s in body[call + 1:]]
        if not passer.done:
            raise SkipFile(f"{self.class_name}.forward has no self.{self.processor}(...) call with "
                           f"{self.position} positional arguments to pass the aux hidden states to")
        new_forward = forward.with_changes(body=forward.body.with_changes(
            body=[*body[:call + 1], *self.after_call, *rest]))
        cls = cls.with_changes(body=cls.body.with_changes(body=[new_forward if s is forward else s for s in cls.body.body]))
        return _with_init(cls, self.init)


class _PassArgument(cst.CSTTransformer):
    def __init__(self, processor: str, argument: cst.Arg, position: int) -> None:
        super().__init__()
        self.processor, self.argument, self.position, self.done = processor, argument, position, False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not m.matches(original_node.func, m.Attribute(value=m.Name("self"), attr=m.Name(self.processor))):
            return updated_node
        positional = [a for a in updated_node.args if a.keyword is None and not a.star]
        if len(positional) != self.position or len(positional) != len(updated_node.args):
            return updated_node
        self.done = True
        return with_arguments(updated_node, [self.argument], self.position)
