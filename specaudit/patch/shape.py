"""The shape of a decoder stack's forward, as the synthesized EAGLE-3 bundles read it: its layer loop, the names its
layer call assigns (the hidden states, the residual), and, in a class the release supports, the statements that
collect the aux hidden states and where they sit (before the loop, in it, in what goes to the next pipeline stage,
after it). Where the stack hands its layers the means to capture in their own call (SGLang 0.5.23's
``capture_output=aux_hidden_states.capture if i in self.layers_to_capture else None``), the layer's side too: the
parameter that takes it and the calls it is handed on to. Reading only: transplant.py moves what a supported class
does into a class of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst
import libcst.matchers as m

from ..scan.match import call_name, dotted
from .layout import one_line

# Calls whose one dict argument is what a pipeline stage sends to the next (vLLM's, SGLang's).
STAGE_TENSORS = ("IntermediateTensors", "PPProxyTensors")


@dataclass(frozen=True)
class LayerLoop:
    """A ``for`` over the decoder layers at the top level of a forward."""

    at: int  # index among the forward's statements
    kind: str  # "islice": walks the layers (islice(self.layers, ...)); "range": walks their indices
    layers: str  # the attribute of self that holds the layers: layers, h
    index: str | None  # the name the loop binds to the layer's index, where it binds one
    layer: str | None  # the name the loop body calls as the layer (None: self.layers[i](...) is called)
    call: int  # index in the loop body of the statement that calls the layer
    hidden: str  # the name the layer call assigns the hidden states to
    residual: str | None  # and the residual, where the layer returns one

    def describe(self) -> str:
        walks = f"islice(self.{self.layers}, ...)" if self.kind == "islice" else f"range(...) over self.{self.layers}"
        returns = f"{self.hidden}, {self.residual}" if self.residual else self.hidden
        return f"`for ... in {walks}` whose layer call returns `{returns}`"


def functions(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}


def statements(function: cst.FunctionDef) -> list[cst.BaseStatement]:
    return list(cst.ensure_type(function.body, cst.IndentedBlock).body)


def read_loop(function: cst.FunctionDef) -> LayerLoop | str:
    """The layer loop of a forward, or why there is none this reads."""
    for at, statement in enumerate(statements(function)):
        if isinstance(statement, cst.For):
            loop = _loop(at, statement)
            if loop is not None:
                return loop
    return "no `for` over self.<layers> (islice or range) whose body calls the layer"


def _loop(at: int, node: cst.For) -> LayerLoop | None:
    iterated: cst.BaseExpression = node.iter
    target: cst.BaseExpression = node.target
    index: str | None = None
    if call_name(iterated) == "enumerate" and isinstance(iterated, cst.Call) and iterated.args \
            and isinstance(target, cst.Tuple) and len(target.elements) == 2:
        iterated = iterated.args[0].value
        index, target = _name(target.elements[0].value), target.elements[1].value
    body = list(cst.ensure_type(node.body, cst.IndentedBlock).body)
    if call_name(iterated) == "islice" and isinstance(iterated, cst.Call) and iterated.args:
        layers, layer = _self_attribute(iterated.args[0].value), _name(target)
        if layers is None or layer is None:
            return None
        return _with_call(at, "islice", layers, index, layer, body)
    if call_name(iterated) == "range" and _name(target):
        index = _name(target)
        for statement in body:  # `layer = self.layers[i]`
            assigned = _assignment(statement)
            if assigned and isinstance(assigned.value, cst.Subscript) and _name(assigned.targets[0].target):
                layers = _self_attribute(assigned.value.value)
                if layers is not None:
                    return _with_call(at, "range", layers, index, _name(assigned.targets[0].target), body)
        for statement in body:  # `... = self.layers[i](...)`
            assigned = _assignment(statement)
            if assigned and isinstance(assigned.value, cst.Call) and isinstance(assigned.value.func, cst.Subscript):
                layers = _self_attribute(assigned.value.func.value)
                if layers is not None:
                    return _with_call(at, "range", layers, index, None, body)
    return None


def _with_call(at: int, kind: str, layers: str, index: str | None, layer: str | None,
               body: list[cst.BaseStatement]) -> LayerLoop | None:
    for position, statement in enumerate(body):
        assigned = _assignment(statement)
        if assigned is None or not isinstance(assigned.value, cst.Call) or len(assigned.targets) != 1:
            continue
        func = assigned.value.func
        called = _name(func) == layer if layer else isinstance(func, cst.Subscript) and _self_attribute(func.value) == layers
        if not called:
            continue
        names = _names(assigned.targets[0].target)
        if names and 1 <= len(names) <= 2:
            return LayerLoop(at, kind, layers, index, layer, position, names[0], names[1] if len(names) == 2 else None)
    return None


def _assignment(statement: cst.BaseStatement) -> cst.Assign | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            and isinstance(statement.body[0], cst.Assign):
        return statement.body[0]
    return None


def _name(node: cst.BaseExpression) -> str | None:
    return node.value if isinstance(node, cst.Name) else None


def _names(node: cst.BaseExpression) -> list[str] | None:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.Tuple):
        names = [_name(e.value) for e in node.elements]
        return None if None in names else [n for n in names if n]
    return None


def _self_attribute(node: cst.BaseExpression) -> str | None:
    name = dotted(node)
    return name[5:] if name and name.startswith("self.") and name.count(".") == 1 else None


# -- how a supported stack collects the aux hidden states ------------------------------------------------------


@dataclass(frozen=True)
class AuxCapture:
    """What a decoder stack the release supports does to collect the aux hidden states, statement by statement."""

    loop: LayerLoop
    header: cst.For  # its loop, as written (the target takes its header where the target binds no index)
    before_loop: tuple[cst.BaseStatement, ...]
    loop_head: tuple[cst.BaseStatement, ...]  # in the loop body, before the layer call
    loop_tail: tuple[cst.BaseStatement, ...]  # after it
    sent: tuple[cst.BaseDictElement, ...]  # what it adds to the tensors a pipeline stage sends on
    after_loop: tuple[cst.BaseStatement, ...]
    threaded: tuple[cst.Arg, ...]  # the layer call's arguments that hand the layer the means to capture (SGLang 0.5.23)
    ends_in_aux_return: bool  # its last statement returns the aux hidden states (the target's last return goes)
    names: frozenset[str]  # the local names holding aux hidden states
    self_reads: frozenset[str]  # the attributes of self those statements read


def read_capture(function: cst.FunctionDef) -> AuxCapture | str:
    """How a supported stack's forward collects the aux hidden states, or why it has no shape this can move."""
    loop = read_loop(function)
    if isinstance(loop, str):
        return loop
    body = statements(function)
    names = aux_names(function, loop.hidden, loop.residual)
    if not names:
        return "its forward returns no aux hidden states beside the final ones"
    header = cst.ensure_type(body[loop.at], cst.For)
    loop_body = list(cst.ensure_type(header.body, cst.IndentedBlock).body)
    call = cst.ensure_type(cst.ensure_type(loop_body[loop.call], cst.SimpleStatementLine).body[0], cst.Assign)
    threaded = tuple(a for a in cst.ensure_type(call.value, cst.Call).args if _mentions(a, names))
    if any(_mentions(t, names) for t in call.targets) or any(a.keyword is None for a in threaded):
        return "its layer call takes the aux hidden states other than as a keyword argument (a shape this does not move)"
    sent = tuple(e for s in body[loop.at + 1:] for e in _sent_elements(s) if _mentions(e, names))
    after = tuple(s for s in body[loop.at + 1:] if _mentions(s, names, skip=sent))
    before = tuple(s for s in body[:loop.at] if _mentions(s, names))
    head = tuple(s for s in loop_body[:loop.call] if _mentions(s, names))
    tail = tuple(s for s in loop_body[loop.call + 1:] if _mentions(s, names))
    moved: tuple[cst.CSTNode, ...] = (*before, *head, *tail, *sent, *after, *threaded)
    return AuxCapture(
        loop, header, before_loop=before, loop_head=head, loop_tail=tail, sent=sent, after_loop=after, threaded=threaded,
        ends_in_aux_return=bool(after) and after[-1] is body[-1] and m.matches(body[-1], m.SimpleStatementLine([m.Return()])),
        names=frozenset(names),
        self_reads=frozenset(a for s in moved for a in self_attributes(s)))


def aux_names(function: cst.FunctionDef, hidden: str, residual: str | None) -> set[str]:
    """The names a forward returns beside the hidden states (``return hidden_states, aux_hidden_states``), and the
    names those are assembled from (``aux_hidden_states = remote_aux + aux_hidden_states``)."""
    names: set[str] = set()
    for returned in m.findall(function, m.Return(value=m.Tuple())):
        elements = cst.ensure_type(cst.ensure_type(returned, cst.Return).value, cst.Tuple).elements
        if len(elements) >= 2 and _name(elements[0].value) == hidden:
            names.update(n for e in elements[1:] if (n := _name(e.value)))
    grown = True
    while grown:
        grown = False
        for node in m.findall(function, m.Assign() | m.AnnAssign()):
            targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                       else [cst.ensure_type(node, cst.AnnAssign).target])
            value = cst.ensure_type(node, cst.Assign | cst.AnnAssign).value  # type: ignore[arg-type]
            if value is None or not any(_name(t) in names for t in targets):
                continue
            read = {n.value for n in m.findall(value, m.Name()) if isinstance(n, cst.Name)} - {hidden, residual, "self"}
            local = _locals(function)
            new = (read & local) - names
            if new:
                names |= new
                grown = True
    return names


def _locals(function: cst.FunctionDef) -> set[str]:
    targets = [a.target for a in m.findall(function, m.AssignTarget() | m.AnnAssign())
               if isinstance(a, cst.AssignTarget | cst.AnnAssign)]
    return {n.value for t in targets for n in m.findall(t, m.Name()) if isinstance(n, cst.Name)}


def _sent_elements(statement: cst.CSTNode) -> list[cst.BaseDictElement]:
    found = []
    for call in m.findall(statement, m.Call(args=[m.Arg(m.Dict())])):
        if call_name(cst.ensure_type(call, cst.Call)) in STAGE_TENSORS:
            found += list(cst.ensure_type(cst.ensure_type(call, cst.Call).args[0].value, cst.Dict).elements)
    return found


def sends_tensors(function: cst.FunctionDef) -> bool:
    """Whether the forward sends the next pipeline stage a ``IntermediateTensors({...})`` literal."""
    return any(_sent_elements(s) for s in statements(function))


class _Mentions(cst.CSTVisitor):
    def __init__(self, names: set[str] | frozenset[str], skip: tuple[cst.CSTNode, ...]) -> None:
        super().__init__()
        self.names, self.skip, self.found = names, skip, False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if any(node is s for s in self.skip):
            return False
        if isinstance(node, cst.Name) and node.value in self.names:
            self.found = True
        return not self.found


def _mentions(node: cst.CSTNode, names: set[str] | frozenset[str], skip: tuple[cst.CSTNode, ...] = ()) -> bool:
    visitor = _Mentions(names, skip)
    node.visit(visitor)
    return visitor.found


def self_attributes(node: cst.CSTNode) -> set[str]:
    """The attributes of self a piece of code reads or calls (``self.layers_to_capture``, ``self._maybe_add_...``)."""
    return {a.attr.value for a in m.findall(node, m.Attribute(value=m.Name("self"))) if isinstance(a, cst.Attribute)}


def captured_at_entry(capture: AuxCapture) -> AuxCapture | str:
    """The capture a stack threads into its layer call (``capture_output=aux.capture if i in self.layers_to_capture
    else None``), made in the stack at the layer's entry instead (``if i in self.layers_to_capture:
    aux.capture(hidden_states)`` before the call): for layers that take the whole residual stream in the hidden
    states they are called with, where the donor's layer captures what enters it (derive.layer_plan says when)."""
    entry = []
    for argument in capture.threaded:
        if not m.matches(argument.value, m.IfExp(orelse=m.Name("None"))):
            threaded = argument.keyword.value if argument.keyword else "an argument"
            return f"its layer call threads {threaded} not as `<capture> if <condition> else None`"
        chosen = cst.ensure_type(argument.value, cst.IfExp)
        call = cst.Call(chosen.body, args=[cst.Arg(cst.Name(capture.loop.hidden))])
        entry.append(cst.If(test=one_line(chosen.test), body=cst.IndentedBlock([
            cst.SimpleStatementLine([cst.Expr(one_line(call))])])))
    return replace(capture, loop_head=(*capture.loop_head, *entry), threaded=())


# -- how a supported decoder layer takes the capture its stack threads into the layer call ---------------------------


@dataclass(frozen=True)
class Sink:
    """A call a decoder layer's forward hands a threaded capture parameter on to."""

    call: str  # its callee, dotted: self.attn_boundary.prepare
    occurrence: int  # which call of that callee in the forward (0: the first)
    argument: cst.Arg  # what it passes: capture=capture_output
    takes_entry: bool  # its first argument is what enters the layer: a parameter of the forward no statement read before


@dataclass(frozen=True)
class LayerCapture:
    """How a decoder layer takes what its stack's layer call threads into it (AuxCapture.threaded): the forward's
    parameters of those keywords, and the calls it hands them to."""

    params: tuple[cst.Param, ...]
    sinks: tuple[Sink, ...]


def read_layer_capture(forward: cst.FunctionDef, keywords: tuple[str, ...]) -> LayerCapture | str:
    """How a layer's forward takes the threaded keywords, or why this cannot move it: each must be a parameter with a
    default that the forward only passes on, as an argument of a call."""
    declared = {p.name.value: p for p in [*forward.params.params, *forward.params.kwonly_params]}
    params, sinks = [], []
    for keyword in keywords:
        param = declared.get(keyword)
        if param is None or param.default is None:
            return f"its forward has no parameter {keyword} with a default"
        params.append(param)
        body = statements(forward)
        uses = _Uses(keyword)
        forward.body.visit(uses)
        if not uses.passed or len(uses.passed) != uses.read:
            return f"its forward does more with {keyword} than pass it to a call"
        for call, argument in uses.passed:
            callee = dotted(call.func)
            if callee is None:
                return f"its forward passes {keyword} to a call of {cst.Module([]).code_for_node(call.func)}"
            same = calls_of(forward, callee)
            sinks.append(Sink(callee, next(i for i, c in enumerate(same) if c is call), argument,
                              _takes_entry(forward, body, call, declared)))
    return LayerCapture(tuple(params), tuple(sinks))


def _takes_entry(forward: cst.FunctionDef, body: list[cst.BaseStatement], call: cst.Call,
                 declared: dict[str, cst.Param]) -> bool:
    first = next((a for a in call.args if a.keyword is None and not a.star), None)
    entering = _name(first.value) if first is not None else None
    if entering not in declared or entering == "self":
        return False
    at = next(i for i, s in enumerate(body) if any(c is call for c in m.findall(s, m.Call())))
    return not any(_mentions(s, {entering}) for s in body[:at])


class _Uses(cst.CSTVisitor):
    """The calls a name is passed to as an argument's value, and how often it is read at all (a keyword argument's
    own name is not a read)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.read = name, 0
        self.passed: list[tuple[cst.Call, cst.Arg]] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.passed += [(node, a) for a in node.args if m.matches(a.value, m.Name(self.name))]

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False  # its keyword is not a read

    def visit_Name(self, node: cst.Name) -> None:
        self.read += node.value == self.name


def calls_of(function: cst.FunctionDef, callee: str) -> list[cst.Call]:
    """The calls of a dotted callee in a function, in the order they are written."""
    return [call for c in m.findall(function.body, m.Call())
            if dotted((call := cst.ensure_type(c, cst.Call)).func) == callee]
