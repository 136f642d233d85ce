"""The landscape of a method in a release: the registered architectures and the classes of the tree that can serve
as its targets, by the method's contract (rules/methods/<engine>/<method>.yaml): the protocol where the release
declares it, else the methods its traced path calls on a plain dense target."""

from __future__ import annotations

from dataclasses import dataclass

from ..launch.target import load_preset
from ..methods.catalog import Method
from ..results.scan import ArchitectureRow, Landscape
from .decide import Evaluator
from .facts import ClassInfo
from .index import TreeIndex
from .registry import Registry
from .resolve import Protocol, Resolver
from .trace import TARGET, Obligation, TracedPath, placeholder


@dataclass(frozen=True)
class Contract:
    """What a target class must have for a method in a release."""

    name: str
    members: tuple[str, ...]
    protocol: Protocol | None
    grep: str  # the text a grep for it would look for


def landscape(index: TreeIndex, resolver: Resolver, registry: Registry | None, protocols: dict[str, Protocol],
              path: TracedPath, method: Method) -> Landscape:
    """The method's landscape, cached with the index."""
    contract = _contract(path, resolver, protocols, method)
    with index.facts_only():
        return index.memo(f"landscape:{method.name}:{contract.name}:{','.join(contract.members)}",
                          lambda: _landscape(index, resolver, registry, protocols, contract, method.name))


def _contract(path: TracedPath, resolver: Resolver, protocols: dict[str, Protocol], method: Method) -> Contract:
    """What a target class must have for the method in this release: the protocol its file names where the release
    declares it (vLLM's SupportsEagle3); elsewhere (SGLang, vLLM before 0.10.1) the methods the traced path calls
    on every target of the method."""
    name = method.contract.get("protocol", "")
    protocol = protocols.get(name)
    if protocol is not None:
        return Contract(name, protocol.members, protocol, name)
    # The calls a launch of the method makes on a plain dense text target (the contract's preset, its class left
    # open): their conditions hold for it, leaving out the call's own `if not hasattr(model, m): raise`. A call
    # reached only for multimodal targets, or for another method, is no contract.
    evaluator = Evaluator(resolver, load_preset(method.contract.get("plain_target", "llama3")), None, method.name, path,
                          "any class")

    def made_on_every_target(o: Obligation) -> bool:
        own_check = f"hasattr({placeholder(TARGET)}, {o.member!r})"
        return all(evaluator.satisfied(c) is True for c in o.guards if c.source not in (own_check, f"not {own_check}"))

    methods = tuple(sorted({o.member for o in path.obligations if o.member is not None
                            and o.kind == "call" and o.receiver == TARGET and made_on_every_target(o)}))
    if methods:
        return Contract(f"{method.title} target methods", methods, None, " and ".join(f"def {m}" for m in methods))
    return Contract(name, (), None, name)


def _landscape(index: TreeIndex, resolver: Resolver, registry: Registry | None,
               protocols: dict[str, Protocol], contract: Contract, method: str) -> Landscape:
    def check(cls: ClassInfo):
        return resolver.has_members(cls, contract.members, contract.name, contract.protocol.cls if contract.protocol else None)

    rows: list[ArchitectureRow] = []
    for arch, entry in sorted((registry.entries if registry else {}).items()):
        found = resolver.find_class(entry.module, entry.class_name)
        if not isinstance(found, ClassInfo):
            rows.append(ArchitectureRow(arch, entry.module, entry.class_name, entry.declared_in, None, None,
                                        {}, None, found.reason))
            continue
        module = index.module(found.module)
        interfaces = {name: resolver.conformance(found, p).conforms for name, p in protocols.items()}
        verdict = check(found) if contract.members else None
        rows.append(ArchitectureRow(arch, found.module, found.name, entry.declared_in, module.path if module else None,
                                    found.line, interfaces, verdict.conforms if verdict else None,
                                    verdict.reason if verdict else f"no {contract.name} in this release"))
    conforming, unknown, grep_classes = [], [], []
    protocol_classes = {p.cls.qualname for p in protocols.values()}
    for module in list(index.modules.values()):
        for cls in module.classes.values():
            if cls.qualname in protocol_classes or not contract.members:
                continue
            # What a grep finds: the protocol named in the class statement, or the methods defined in its body.
            if contract.protocol is not None:
                grepped = any(contract.name in base for base in cls.base_sources)
            else:
                grepped = all(member in cls.bound for member in contract.members)
            if grepped:
                grep_classes.append(cls.qualname)
            verdict = check(cls).conforms
            if verdict:
                conforming.append(cls.qualname)
            elif verdict is None:
                unknown.append(cls.qualname)
    return Landscape(
        method=method,
        protocols={name: list(p.members) for name, p in sorted(protocols.items())},
        contract=contract.name,
        contract_members=list(contract.members),
        grep_pattern=contract.grep,
        architectures=rows,
        conforming_classes=sorted(conforming),
        unknown_classes=sorted(unknown),
        grep_classes=sorted(grep_classes),
    )
