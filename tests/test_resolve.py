"""Name resolution, MRO and protocol conformance on small hand-written trees: the edge cases real trees
rarely isolate (the main evidence is tests/test_vllm_facts.py on real releases)."""

from __future__ import annotations

from specaudit.scan.index import build_index
from specaudit.scan.resolve import Resolver
from specaudit.tree.locate import locate

INTERFACES = """
    from typing import ClassVar, Literal, Protocol, runtime_checkable

    @runtime_checkable
    class SupportsEagle3(Protocol):
        supports_eagle3: ClassVar[Literal[True]] = True
        def set_aux_hidden_state_layers(self, layers): ...
        def get_eagle3_aux_hidden_state_layers(self): ...
"""


def resolver_for(make_tree, files):
    tree = locate(str(make_tree({"vllm/model_executor/models/interfaces.py": INTERFACES, **files})))
    resolver = Resolver(build_index(tree))
    protocol = resolver.protocols("vllm.model_executor.models.interfaces")["SupportsEagle3"]
    return resolver, protocol


def conforms(resolver, protocol, module, name):
    cls = resolver.find_class(module, name)
    return resolver.conformance(cls, protocol)


def test_structural_conformance_without_inheriting_the_protocol(make_tree):
    resolver, protocol = resolver_for(make_tree, {"vllm/model_executor/models/a.py": """
        class Structural:
            supports_eagle3 = True
            def set_aux_hidden_state_layers(self, layers): ...
            def get_eagle3_aux_hidden_state_layers(self): ...

        class Annotated:
            supports_eagle3: bool   # an annotation alone binds nothing: isinstance says no
            def set_aux_hidden_state_layers(self, layers): ...
            def get_eagle3_aux_hidden_state_layers(self): ...
    """})
    assert conforms(resolver, protocol, "vllm.model_executor.models.a", "Structural").conforms is True
    annotated = conforms(resolver, protocol, "vllm.model_executor.models.a", "Annotated")
    assert annotated.conforms is False and annotated.missing == ("supports_eagle3",)


def test_conformance_through_aliases_reexports_star_imports_and_relative_imports(make_tree):
    resolver, protocol = resolver_for(make_tree, {
        "vllm/model_executor/models/base.py": """
            from .interfaces import SupportsEagle3 as E3
            class Base(E3):
                def set_aux_hidden_state_layers(self, layers): ...
                def get_eagle3_aux_hidden_state_layers(self): ...
        """,
        "vllm/model_executor/models/__init__.py": "from .base import Base\nAlias = Base\n",
        "vllm/model_executor/models/shim.py": "from vllm.model_executor.models import *\n",
        "vllm/model_executor/models/child.py": """
            from vllm.model_executor import models
            from . import shim
            class ViaPackage(models.Alias): ...
            class ViaStar(shim.Base): ...
        """,
    })
    for name in ("ViaPackage", "ViaStar"):
        result = conforms(resolver, protocol, "vllm.model_executor.models.child", name)
        assert result.conforms is True, result.reason
        assert result.provided_by["supports_eagle3"] == "vllm.model_executor.models.interfaces.SupportsEagle3"


def test_missing_method_is_named(make_tree):
    resolver, protocol = resolver_for(make_tree, {"vllm/model_executor/models/a.py": """
        from .interfaces import SupportsEagle3
        class Half(SupportsEagle3):
            def set_aux_hidden_state_layers(self, layers): ...
        class Quarter:
            def set_aux_hidden_state_layers(self, layers): ...
    """})
    # Half inherits the protocol's own stubs, which bind every member: isinstance says yes.
    assert conforms(resolver, protocol, "vllm.model_executor.models.a", "Half").conforms is True
    quarter = conforms(resolver, protocol, "vllm.model_executor.models.a", "Quarter")
    assert quarter.conforms is False
    assert quarter.missing == ("get_eagle3_aux_hidden_state_layers", "supports_eagle3")


def test_unresolvable_base_makes_the_answer_unknown(make_tree):
    resolver, protocol = resolver_for(make_tree, {"vllm/model_executor/models/a.py": """
        from vllm.model_executor.models.gone import Vanished
        class Orphan(Vanished): ...
        class Dynamic(make_base()): ...
    """})
    orphan = conforms(resolver, protocol, "vllm.model_executor.models.a", "Orphan")
    assert orphan.conforms is None and "no module vllm.model_executor.models.gone" in orphan.reason
    dynamic = conforms(resolver, protocol, "vllm.model_executor.models.a", "Dynamic")
    assert dynamic.conforms is None and "not a plain name" in dynamic.reason


def test_import_cycle_and_self_named_subclass(make_tree):
    resolver, protocol = resolver_for(make_tree, {
        "vllm/model_executor/models/x.py": "from .y import Thing\n",
        "vllm/model_executor/models/y.py": "from .x import Thing\n",
        "vllm/model_executor/models/llama.py": """
            from .interfaces import SupportsEagle3
            class LlamaForCausalLM(SupportsEagle3): ...
        """,
        "vllm/model_executor/models/z.py": """
            from .x import Thing
            from .llama import LlamaForCausalLM
            class Looped(Thing): ...
            class LlamaForCausalLM(LlamaForCausalLM): ...   # subclasses the imported one
        """,
    })
    looped = conforms(resolver, protocol, "vllm.model_executor.models.z", "Looped")
    assert looped.conforms is None and "cycle" in looped.reason
    assert conforms(resolver, protocol, "vllm.model_executor.models.z", "LlamaForCausalLM").conforms is True


def test_c3_order_matches_python(make_tree):
    resolver, _ = resolver_for(make_tree, {"vllm/model_executor/models/d.py": """
        class O: ...
        class A(O): ...
        class B(O): ...
        class C(A, B): ...
    """})
    cls = resolver.find_class("vllm.model_executor.models.d", "C")
    names = [c.name for c in resolver.hierarchy(cls).linear if hasattr(c, "name")]
    assert names == ["C", "A", "B", "O"]  # as C.__mro__ orders them


def test_platform_dispatch_takes_the_default_branch_and_type_checking_is_skipped(make_tree):
    # Shapes from vLLM 0.32: vllm/models/kimi_k3/__init__.py (if TYPE_CHECKING / elif is_rocm() / else),
    # llama_eagle3.py (`if TYPE_CHECKING: class _Base(nn.Module) ... else: _Base = LlamaForCausalLM`), and
    # qwen4_exp/__init__.py (a module __getattr__ with the classes declared under TYPE_CHECKING).
    resolver, protocol = resolver_for(make_tree, {
        "vllm/model_executor/models/llama.py": """
            from .interfaces import SupportsEagle3
            class LlamaForCausalLM(SupportsEagle3): ...
        """,
        "vllm/model_executor/models/plain.py": "class Plain: ...\n",
        "vllm/model_executor/models/dispatch.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .plain import Plain as Chosen
                class _Base: ...
            elif current_platform.is_rocm():
                from .plain import Plain as Chosen
                _Base = Chosen
            else:
                from .llama import LlamaForCausalLM as Chosen
                _Base = Chosen
            class Derived(_Base): ...
        """,
        "vllm/model_executor/models/lazy.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .llama import LlamaForCausalLM as Lazy
            def __getattr__(name):
                ...
        """,
    })
    for module, name in (("dispatch", "Chosen"), ("dispatch", "Derived"), ("lazy", "Lazy")):
        assert conforms(resolver, protocol, f"vllm.model_executor.models.{module}", name).conforms is True, name


def test_a_name_computed_at_import_is_unknown_with_its_line(make_tree):
    resolver, protocol = resolver_for(make_tree, {"vllm/model_executor/models/a.py": """
        RMSNorm = _resolve("layernorm", "RMSNorm")
        class TPAwareRMSNorm(RMSNorm): ...
    """})
    result = conforms(resolver, protocol, "vllm.model_executor.models.a", "TPAwareRMSNorm")
    assert result.conforms is None and "computed at import time (vllm/model_executor/models/a.py:2)" in result.reason


def test_a_protocol_that_is_not_runtime_checkable_cannot_be_checked(make_tree):
    resolver, _ = resolver_for(make_tree, {"vllm/model_executor/models/a.py": """
        class Plain:
            def make_empty_intermediate_tensors(self): ...
    """, "vllm/model_executor/models/interfaces.py": INTERFACES + """
    class _MakeEmptyIntermediateTensors(Protocol):
        def make_empty_intermediate_tensors(self): ...
    """})
    protocol = resolver.protocols("vllm.model_executor.models.interfaces")["_MakeEmptyIntermediateTensors"]
    assert protocol.runtime_checkable is False
    result = resolver.conformance(resolver.find_class("vllm.model_executor.models.a", "Plain"), protocol)
    assert result.conforms is None and "isinstance raises TypeError" in result.reason


def test_a_factory_that_may_return_its_argument_leaves_what_only_it_adds_unknown(make_tree):
    # The shape of vLLM's adapters.py: `if is_pooling_model(cls): return cls` before building the subclass.
    resolver, protocol = resolver_for(make_tree, {
        "vllm/model_executor/models/adapters.py": """
            def wrap(cls):
                if already(cls):
                    return cls
                from .interfaces import SupportsEagle3
                class Wrapped(cls, SupportsEagle3): ...
                return Wrapped

            def always(cls):
                class Wrapped(cls):
                    supports_eagle3 = True
                    def set_aux_hidden_state_layers(self, layers): ...
                    def get_eagle3_aux_hidden_state_layers(self): ...
                    def itself(self):
                        return cls  # a method's return, not the factory's
                return Wrapped

            def sometimes(cls):
                class Wrapped(cls, SupportsEagle3): ...
                if registry:
                    return registry.lookup(cls)
                return Wrapped
        """,
        "vllm/model_executor/models/a.py": """
            from .adapters import always, sometimes, wrap
            class Plain: ...
            Maybe = wrap(Plain)
            class Sure(always(Plain)): ...
            class Other(sometimes(Plain)): ...
        """,
    })
    maybe = conforms(resolver, protocol, "vllm.model_executor.models.a", "Maybe")
    assert maybe.conforms is None and "returns its argument unchanged" in maybe.reason
    assert conforms(resolver, protocol, "vllm.model_executor.models.a", "Sure").conforms is True
    other = conforms(resolver, protocol, "vllm.model_executor.models.a", "Other")  # may return a lookup's answer
    assert other.conforms is None and "sometimes(Plain)" in other.reason
