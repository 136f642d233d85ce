"""A patch bundle synthesized for a target the release does not support for EAGLE-3, derived from the classes it
does support of the same shape (derive, don't declare): the first of them whose decoder stack loops over its
layers as the target's does and collects the aux hidden states in statements of its own (shape.py) gives the
codemods what to move (transplant.py); the bundle names that donor, and its changes re-derive from it on apply.

The bundle is written out as a directory (bundle.yaml, code/, README.md) for a person to review and commit, and
applied as any other (bundles.py: journaled, reversible, postcondition by rescan). A target whose model has no
shape to match is refused with the difference named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m
import yaml

from .. import __version__
from ..core.errors import SpecauditError
from ..core.types import ExitCode, Status
from ..launch.request import Launch
from ..launch.target import Target, load_preset
from ..scan.facts import ClassInfo
from .derive import causal_parts, class_node, layer_plan, member_imports, stack_parts
from .shape import functions, read_loop, self_attributes, sends_tensors

if TYPE_CHECKING:
    from ..core.types import Finding
    from ..scan.audit import Analysis

# Donors tried first: the families every release supports, whose code upstream copies into new models.
_FIRST_DONORS = ("LlamaForCausalLM", "Qwen2ForCausalLM")
# The release's own markers of a stack whose layers are not all attention (vLLM's interfaces.py).
_HYBRID_PROTOCOLS = ("IsHybrid", "HasInnerState")
_ALLOWLIST = "vllm-eagle3-model-type-allowlist"


class ShapeRefused(SpecauditError):
    """The target's model has no shape a supported class of the release shares."""

    exit_code = ExitCode.OUT_OF_RANGE


@dataclass(frozen=True)
class Synthesized:
    directory: Path  # the bundle directory written
    bundle_id: str
    donor: str  # the supported class the stack's capture was derived from


def target_of_architecture(name: str) -> Target:
    """A target named by its architecture alone: the config the engine's registry and gates read of it."""
    return Target(name=name, source=f"architecture {name}", config={"architectures": [name]})


def target_named(name: str) -> Target:
    """What ``--target NAME`` names, for ``patch`` and ``matrix`` alike: a bundled preset, by its name or its Hub id;
    else an architecture, where the name is spelt as the engines' registries spell one (a class name:
    ``MixtralForCausalLM``, ``GPT2LMHeadModel``). Any other name is refused as load_preset refuses it, with the
    presets close to it."""
    try:
        return load_preset(name)
    except SpecauditError:
        if name.isidentifier() and name[:1].isupper():
            return target_of_architecture(name)
        raise


def synthesize(analysis: Analysis, target: Target, out_dir: Path) -> Synthesized:
    """Derive the bundle that opens the EAGLE-3 gates for ``target`` in the analysed release; write it out."""
    from ..scan.audit import audit

    tree, resolver = analysis.tree, analysis.resolver
    blocking = [f for f in audit(analysis, Launch(target, method="eagle3")).findings if f.status == Status.BLOCKS]
    if not blocking:
        raise SpecauditError(f"{target.name} is not blocked for EAGLE-3 in {tree.label}: nothing to synthesize")
    arch = (target.architectures or [""])[0]
    entry = analysis.registry.entries.get(arch) if analysis.registry else None
    if entry is None:
        raise SpecauditError(f"{arch or target.name!r} is not an architecture {tree.label} registers")
    cls = resolver.find_class(entry.module, entry.class_name)
    if not isinstance(cls, ClassInfo):
        raise SpecauditError(f"{entry.module}.{entry.class_name}: {cls.reason}")
    for marker in _HYBRID_PROTOCOLS:
        protocol = analysis.protocols.get(marker)
        if protocol is not None and resolver.conformance(cls, protocol).conforms:
            raise ShapeRefused(f"{cls.name} is {marker} in {tree.label}: a hybrid attention/SSM stack, whose layers' "
                               "hidden states are not the residual stream of attention layers that EAGLE-3 heads read")
    members = _required_members(analysis, blocking)
    # vLLM's interface and SGLang's set_eagle3_layers_to_capture need the stack to collect; a class that has the
    # capture and lacks only get_embed_and_head (SGLang 0.5.17's Qwen2-MoE) needs the members alone.
    needs_capture = "SupportsEagle3" in analysis.protocols or "set_eagle3_layers_to_capture" in members
    target_stack = _stack_of(analysis, cls)
    if isinstance(target_stack, str) and needs_capture:
        raise ShapeRefused(f"{cls.name}: {target_stack}")
    donor = _donor(analysis, target_stack) if needs_capture and not isinstance(target_stack, str) else None
    stack_aliases: dict[str, str] = {}
    causal_aliases: dict[str, str] = {}
    donor_cls = _supported(analysis)[0]
    if donor is not None and not isinstance(target_stack, str):
        stack_attr, stack_cls, loop = target_stack
        donor_cls, (donor_stack_attr, donor_stack, donor_loop) = donor
        stack_aliases = {donor_loop.layers: loop.layers} if donor_loop.layers != loop.layers else {}
        embed = _embedding(analysis, donor_stack), _embedding(analysis, stack_cls)
        if embed[0] and embed[1] and embed[0] != embed[1]:
            stack_aliases[embed[0]] = embed[1]
        causal_aliases = {donor_stack_attr: stack_attr} if donor_stack_attr != stack_attr else {}
    bundle_id = f"{tree.engine.name}-eagle3-synth-{arch.lower()}-{tree.version}"
    directory = out_dir / bundle_id
    changes: list[dict[str, Any]] = []
    opens = {f.rule_id for f in blocking}
    interface = next((f.rule_id for f in blocking if f.rule_id != _ALLOWLIST), _ALLOWLIST)
    if _ALLOWLIST in opens:
        changes.append({"id": "allowlist", "opens": _ALLOWLIST, "codemod": "extend_allowlist",
                        "args": {"add": [target.text_model_type]}})
    if donor is not None and not isinstance(target_stack, str):
        stack_args: dict[str, Any] = {"class": stack_cls.qualname, "like": donor_stack.qualname, "aliases": stack_aliases}
        parts = stack_parts(analysis.index, analysis.resolver, donor_stack)
        layers = layer_plan(analysis.index, analysis.resolver, donor_stack, stack_cls, parts.capture) \
            if not isinstance(parts, str) else None
        if layers is not None and not isinstance(layers, str) and layers.layer is not None:
            stack_args["layer"] = layers.layer.qualname  # its decoder layer takes the capture too (derive.layer_plan)
        changes.append({"id": "aux-hidden-states", "opens": interface, "codemod": "collect_aux_hidden_states",
                        "args": stack_args})
        causal = causal_parts(analysis.index, donor_cls, donor_stack_attr)
        if isinstance(causal, str):
            raise ShapeRefused(f"{donor_cls.name}: {causal}")
        if causal is not None:
            changes.append({"id": "pass-aux-hidden-states", "opens": interface, "codemod": "pass_aux_hidden_states",
                            "args": {"class": cls.qualname, "stack": stack_attr, "like": donor_cls.qualname,
                                     "like_stack": donor_stack_attr}})
    protocol_args: dict[str, Any] = {"class": cls.qualname, "aliases": causal_aliases}
    if "SupportsEagle3" in analysis.protocols:
        protocol_args["protocol"] = "SupportsEagle3"
    code = _members_code(analysis, cls, members, causal_aliases, donor_cls) if members else None
    (directory / "code").mkdir(parents=True, exist_ok=True)  # only once nothing is refused: no empty bundle is left
    if code is not None:
        (directory / "code" / f"{arch.lower()}_members.py").write_text(code, encoding="utf-8")
        protocol_args["code"] = f"code/{arch.lower()}_members.py"
    changes.append({"id": "eagle3-target-contract", "opens": interface, "codemod": "implement_protocol",
                    "args": protocol_args})
    manifest = {
        "id": bundle_id, "engine": tree.engine.name, "versions": f"=={tree.version}", "target": arch,
        "method": "eagle3", "presets": [], "config": target.config,
        "description": (f"EAGLE-3 for {cls.name} ({arch}) in {tree.engine.name} {tree.version}, which does not support "
                        f"it: what {donor_cls.name} does for EAGLE-3 in this release (its stack's aux-hidden-state "
                        f"capture, the members the engine calls), moved into {cls.name} under its own names."),
        "origin": f"synthesized by specaudit {__version__} from {donor_cls.qualname} of {tree.label}",
        "forwarded": "not-needed",
        "upstream": f"none known; where a later release supports {arch}, its preconditions no longer hold.",
        "changes": changes,
    }
    (directory / "bundle.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False, width=110), encoding="utf-8")
    (directory / "README.md").write_text(_readme(manifest, blocking, donor_cls), encoding="utf-8")
    return Synthesized(directory, bundle_id, donor_cls.qualname)


def _donor(analysis: Analysis, target: tuple[str, ClassInfo, Any]) -> tuple[ClassInfo, tuple[str, ClassInfo, Any]]:
    """The first supported class whose decoder stack collects the aux states in a shape the target's stack has."""
    _, stack_cls, loop = target
    stack_forward = functions(class_node(analysis.index, stack_cls)[1])["forward"]
    reasons = []
    for candidate in _supported(analysis):
        found = _stack_of(analysis, candidate)
        if isinstance(found, str):
            continue
        parts = stack_parts(analysis.index, analysis.resolver, found[1])
        if isinstance(parts, str):
            reasons.append(parts)
        elif parts.capture.loop.kind != loop.kind:
            reasons.append(f"{found[1].name} loops {parts.capture.loop.describe()}")
        elif parts.capture.sent and not sends_tensors(stack_forward):
            reasons.append(f"{found[1].name} sends its aux states to the next pipeline stage in IntermediateTensors, "
                           f"which {stack_cls.name}.forward does not build")
        elif isinstance(layers := layer_plan(analysis.index, analysis.resolver, found[1], stack_cls, parts.capture),
                        str):
            reasons.append(f"{found[1].name}'s layers capture in their own call: {layers}")
        else:
            return candidate, found
    seen = "; ".join(dict.fromkeys(reasons)) or "no supported class has a decoder stack this reads"
    raise ShapeRefused(f"{stack_cls.name} {loop.describe()}; no class {analysis.tree.label} supports for EAGLE-3 has "
                       f"that shape ({seen})")


def _supported(analysis: Analysis) -> list[ClassInfo]:
    """The registered classes the release supports as EAGLE-3 targets, the families upstream copies from first."""
    resolver, registry = analysis.resolver, analysis.registry
    protocol = analysis.protocols.get("SupportsEagle3")
    found: dict[str, ClassInfo] = {}
    entries = sorted(registry.entries.values() if registry else [],
                     key=lambda e: (e.class_name not in _FIRST_DONORS, _FIRST_DONORS.index(e.class_name)
                                    if e.class_name in _FIRST_DONORS else 0, e.architecture))
    for entry in entries:
        cls = resolver.find_class(entry.module, entry.class_name)
        if not isinstance(cls, ClassInfo) or cls.qualname in found:
            continue
        supported = (resolver.conformance(cls, protocol).conforms if protocol is not None
                     else resolver.method_node(cls, "set_eagle3_layers_to_capture") is not None)
        if supported:
            found[cls.qualname] = cls
    return list(found.values())


def _stack_of(analysis: Analysis, cls: ClassInfo) -> tuple[str, ClassInfo, Any] | str:
    """The attribute holding the class's decoder stack, the stack's class and its layer loop; or why none is read."""
    reasons = []
    for attr in sorted(analysis.resolver.instance_attributes(cls)):
        part = analysis.resolver.part_class(cls, attr)
        if part is None or part is cls:
            continue
        forward = functions(class_node(analysis.index, part)[1]).get("forward")
        if forward is None:
            continue
        loop = read_loop(forward)
        if isinstance(loop, str):
            reasons.append(f"{part.name}.forward has {loop}")
            continue
        return attr, part, loop
    return "; ".join(reasons) or "no part of it is a decoder stack with a forward (no recognisable layer loop)"


def _embedding(analysis: Analysis, stack: ClassInfo) -> str | None:
    """The attribute the stack keeps its token embedding in (``embed_tokens``, GPT-2's ``wte``)."""
    init = functions(class_node(analysis.index, stack)[1]).get("__init__")
    if init is None:
        return None
    assigned = [(cst.ensure_type(cst.ensure_type(a, cst.Assign).targets[0].target, cst.Attribute).attr.value,
                 cst.Module([]).code_for_node(cst.ensure_type(cst.ensure_type(a, cst.Assign).value, cst.Call).func))
                for a in m.findall(init, m.Assign([m.AssignTarget(m.Attribute(value=m.Name("self")))], value=m.Call()))]
    for wanted in ("VocabParallelEmbedding", "Embedding"):
        found = [attr for attr, made in assigned if made.endswith(wanted)]
        if found:
            return found[0]
    return None


def _required_members(analysis: Analysis, blocking: list[Finding]) -> list[str]:
    """The methods the blocking gates call on the target (SGLang's required_method rules)."""
    rules = {r.id: r for r in analysis.rules}
    return [str(rules[f.rule_id].params["method"]) for f in blocking
            if f.rule_id in rules and rules[f.rule_id].kind == "required_method"]


def _members_code(analysis: Analysis, cls: ClassInfo, members: list[str], aliases: dict[str, str],
                  first: ClassInfo) -> str:
    """The required methods, each from the first supported class whose method reads only what the target has and
    hands nothing on to a part (a method of ``self.model`` the target's stack may not have)."""
    have = set(analysis.resolver.instance_attributes(cls)) | set(aliases) | {"capture_aux_hidden_states", "config"}
    have |= {name for base in analysis.resolver.hierarchy(cls).linear if isinstance(base, ClassInfo) for name in base.bound}
    nodes, donors, imports, misses = [], [], [], []
    for member in members:
        for donor in [first, *(c for c in _supported(analysis) if c is not first)]:
            found = analysis.resolver.method_node(donor, member)
            if found is None:
                continue
            node = _function(analysis, found[0], member)
            reads = self_attributes(node) - have
            delegates = m.findall(node, m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("self")))))
            needed = member_imports(analysis.index, found[0], [node])
            if reads or delegates or isinstance(needed, str):
                misses.append(f"{donor.name}.{member} " + (f"reads self.{', self.'.join(sorted(reads))}" if reads else
                                                          "calls a method of a part" if delegates else str(needed)))
                continue
            nodes.append(node)
            donors.append(f"{member} from {found[0].qualname}")
            imports += [i for i in needed if i not in imports]
            break
        else:
            shown = "; ".join(misses[:6]) + (f"; and {len(misses) - 6} more" if len(misses) > 6 else "")
            raise ShapeRefused(f"no class the release supports has a {member} reading only what {cls.name} has "
                               f"({shown})")
    lines = [f"# For {cls.name}: {'; '.join(donors)}, as this release has them.",
             "# Derived by specaudit; each function becomes a method of the class.", ""]
    lines += [f"from {i.module} import {i.obj_name}" + (f" as {i.alias}" if i.alias else "") for i in imports]
    body = "\n\n".join(cst.Module([]).code_for_node(n.with_changes(leading_lines=[])).rstrip() + "\n" for n in nodes)
    return "\n".join(lines) + "\n\n\n" + body


def _function(analysis: Analysis, owner: ClassInfo, name: str) -> cst.FunctionDef:
    return functions(class_node(analysis.index, owner)[1])[name]


def _readme(manifest: dict[str, Any], blocking: list[Finding], donor: ClassInfo) -> str:
    gates = "\n".join(f"- `{f.rule_id}` at `{f.location}`: {f.error or f.title}" for f in blocking)
    changes = "\n".join(f"- `{c['id']}` ({c['codemod']}): {json.dumps(c['args'])}" for c in manifest["changes"])
    return f"""# {manifest['id']}

{manifest['description']}

Where it came from: {manifest['origin']}. Nothing in it was written for this target by hand: the target's decoder
stack has the shape of `{donor.name}`'s (its layer loop, its layer call's hidden states and residual), whose
forward's aux-hidden-state statements are moved into the target's under its names; `{donor.name}` and the
release's other supported classes give the rest of the contract.

## Gates it opens ({manifest['engine']} {manifest['versions']})

{gates}

## Changes (re-derived from the donor when applied: specaudit/patch/transplant.py)

{changes}

## Use

```
specaudit patch --bundle {manifest['id']} --dry-run   # the diff
specaudit patch --bundle {manifest['id']}             # apply, rescan
specaudit patch --status                                # what is applied, drift since
specaudit patch --revert                                # back to the pristine files
```
"""
