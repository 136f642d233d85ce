"""The player of engine code (specaudit/play/), code in and answer out, in the spirit of pyflakes' ``flakes(code,
*messages)``: ``played(code, **parameters)`` plays the last function of a few lines of engine-shaped code on the
values given and says what it returns, or what it raises. No tree, no network."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import pytest

from specaudit.play.libraries.environ import declared_default, truthy
from specaudit.play.modules import ModuleScope
from specaudit.play.operators import MAX_VALUE_CHARS, binary, compare, plain_method, pure
from specaudit.play.player import MAX_CALLS, Player, answer, call, message
from specaudit.play.values import CLASS, UNKNOWN, ConfigObject, EngineObject, Raised, ReleaseClass, Unknown, truth


class _Code:
    """A few lines of code read on their own, as the module ``code`` of a release (play.modules.Modules)."""

    def __init__(self, source: str):
        self.tree = ast.parse(textwrap.dedent(source))

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None:
        return (self.tree, "code.py") if name == "code" else None


def played(code: str, **parameters: Any) -> Any:
    """What the last function of ``code`` gives on these parameters (the rest: their defaults, else unknown): its
    value where every way returns the same, the Raised where every way raises, else the set of what the ways give."""
    module = _Code(code)
    scope = ModuleScope(module, module.tree, "code.py")
    function = [n for n in module.tree.body if isinstance(n, ast.FunctionDef)][-1]
    outcomes, _ = call(function, scope, [], parameters)
    if all(o.raises for o in outcomes):
        return Raised(outcomes[0].error or "")
    returned = [o.method for o in outcomes if not o.raises]
    if len(returned) == len(outcomes) and all(r == returned[0] for r in returned):
        return returned[0]
    return {Raised(o.error or "") if o.raises else o.method for o in outcomes}


def raised(value: Any) -> str:
    assert isinstance(value, Raised), value
    return value.error


# -- the value domain -----------------------------------------------------------------------------------------------


def test_one_unknown_says_why_and_stays_itself_through_a_copy():
    import copy

    unknown = Unknown("self.model (not bound)")
    assert copy.deepcopy(unknown) is unknown
    assert "not bound" in repr(unknown) and repr(UNKNOWN) == "<unknown>"
    assert truth(unknown) is unknown


def test_an_engine_object_is_true_whatever_it_holds():
    class Config(EngineObject):
        def __len__(self) -> int:
            return 0  # an empty config object is still there

    assert truth(Config()) is True
    assert truth({CLASS: "vllm.config:ModelConfig"}) is True
    assert truth({}) is False and truth([0]) is True


# -- operators: Python's own failures are the engine's ------------------------------------------------------------


@pytest.mark.parametrize("code,error", [
    ("def f(n):\n    return 8 % n", "ZeroDivisionError"),
    ("def f(n):\n    return n > 1", "TypeError"),
    ("def f(n):\n    return n + 1", "TypeError"),
    ("def f(n):\n    return [1, 2][n]", "IndexError"),
])
def test_an_operation_that_fails_on_the_launch_values_raises_as_the_engine_does(code, error):
    value = 0 if "%" in code else 5 if "[" in code else None
    assert raised(played(code, n=value)).startswith(error)


def test_an_operation_on_what_is_not_known_is_unknown_not_a_raise():
    assert isinstance(played("def f(n):\n    return 8 % n"), Unknown)  # n not given: not known
    assert isinstance(compare(ast.Lt(), "a", 1), Unknown)  # a type the player does not order: not a refusal
    assert isinstance(binary(ast.Pow(), 2, 3), Unknown)  # ** is not played: 2 ** 2 ** 99 would not finish


def test_no_value_grows_past_the_bound():
    assert isinstance(binary(ast.Mult(), "k", MAX_VALUE_CHARS + 1), Unknown)
    assert binary(ast.Mult(), "k", 3) == "kkk"
    assert isinstance(plain_method("k" * (MAX_VALUE_CHARS - 1), "replace", ["k", "kk"]), Unknown)


@pytest.mark.parametrize("receiver", ["s", "s.missing"], ids=["known", "unknown"])
def test_a_chain_of_method_calls_plays_each_receiver_once(expressions_played, receiver):
    # CI on 749c9b6: a 24-step `.replace()` chain in a gate's condition ran 410 s, as each call played its
    # receiver again to name its callee (2**steps). The expressions played grow by the same count each step.
    def counted(steps: int) -> int:
        expressions_played.clear()
        played(f"def f(s):\n    return {receiver}" + '.replace("a", "aa")' * steps, s="a")
        return len(expressions_played)

    four, eight, twelve = counted(4), counted(8), counted(12)  # under the size bound: every step computed
    assert twelve - eight == eight - four


def test_the_methods_of_plain_values_are_shared_and_only_those():
    assert plain_method({"a", "b"}, "intersection", [["b", "c"]]) == {"b"}
    assert plain_method("Eagle3LlamaForCausalLM", "startswith", ["Eagle3"]) is True
    assert isinstance(plain_method("x", "format", []), Unknown)  # not a listed method: never called
    assert isinstance(pure("sum", [Unknown("n")]), Unknown) and pure("sum", [[1, 2]]) == 3


# -- the statement player: fork where the followed value is decided, stop elsewhere ------------------------------------


def test_an_unknown_condition_that_decides_the_return_forks():
    code = """
    def use_v2(is_moe, enforce):
        if enforce:
            return True
        if is_moe:
            return False
        return True
    """
    assert played(code, enforce=False, is_moe=True) is False
    assert played(code, enforce=True) is True  # is_moe is never read on that way
    assert played(code, enforce=False) == {True, False}


def test_an_unknown_condition_that_only_assigns_stops_there_and_forgets():
    code = """
    def k(method, n):
        if method == "suffix":
            n = 24
        return n
    """
    assert played(code, method="suffix", n=None) == 24
    assert played(code, method="eagle3", n=3) == 3
    assert isinstance(played(code, n=3), Unknown)  # the method is not known: neither is what the if left in n


def test_a_check_written_as_an_assert_or_an_if_raise_is_the_same_refusal():
    as_assert = """
    def check(k, n_predict):
        assert k <= n_predict, "too many tokens"
        return k
    """
    as_raise = """
    def check(k, n_predict):
        if not k <= n_predict:
            raise AssertionError("too many tokens")
        return k
    """
    for code in (as_assert, as_raise):
        assert raised(played(code, k=5, n_predict=3)).startswith("AssertionError")
        assert played(code, k=3, n_predict=3) == 3


def test_a_helper_of_the_module_is_followed_and_its_raise_is_the_caller_s():
    code = """
    LIMIT = 8

    def _validate(k):
        if k > LIMIT:
            raise ValueError(f"k={k} is over {LIMIT}")
        return k

    def resolve(k):
        return _validate(k) * 2
    """
    assert played(code, k=3) == 6
    assert raised(played(code, k=9)) == "ValueError: k=9 is over 8"


def test_calls_are_followed_only_so_deep():
    code = "def f(n):\n    return f(n - 1) if n else 0"
    assert played(code, n=1) == 0
    assert isinstance(played(code, n=MAX_CALLS + 2), Unknown)


def test_the_followed_variable_of_a_method_is_played_with_its_steps():
    function = ast.parse(textwrap.dedent("""
    def __post_init__(self):
        if self.method is None and self.model is not None:
            self.method = "draft_model"
        elif self.method == "eagle-3":
            raise ValueError("eagle-3 is spelt eagle3")
    """)).body[0]
    assert isinstance(function, ast.FunctionDef)
    player = Player("self.method", {"self.model": "/drafts/head"})
    (outcome,) = player.run(function, None)
    assert outcome.method == "draft_model" and outcome.steps[0].line == 4
    (refused,) = player.run(function, "eagle-3")
    assert refused.error == "ValueError: eagle-3 is spelt eagle3"
    ways = player.run(function, Unknown("the launch names no method"))
    assert len(ways) == 2  # a condition it cannot decide, on a statement that sets the method: both ways


# -- what it knows of libraries -------------------------------------------------------------------------------------


def test_an_envs_module_s_defaults_are_read_whatever_the_call_s_spelling():
    tree = ast.parse(textwrap.dedent("""
    import os
    environment_variables = {
        "VLLM_USE_V2_MODEL_RUNNER": lambda: bool(int(os.getenv("VLLM_USE_V2_MODEL_RUNNER", "0"))),
        "VLLM_TARGET": lambda: os.environ.get("VLLM_TARGET"),
    }
    """))
    assert declared_default(tree, "VLLM_USE_V2_MODEL_RUNNER") == (True, "0")
    assert declared_default(tree, "VLLM_TARGET") == (True, None)
    assert declared_default(tree, "VLLM_ABSENT") == (False, None)
    assert truthy("1") and truthy("True") and not truthy("0") and not truthy(None)


def test_a_loop_that_may_return_is_never_read_past():
    # The loop is not played: the value after it is one way's answer, never the function's whole one.
    code = """
    def layers(n):
        for i in range(n):
            if i > 2:
                return (i,)
        return (0, 1)
    """
    assert played(code, n=5) != (0, 1)
    assert any(isinstance(v, Unknown) for v in played(code, n=5))


# -- the release's classes, played as Python runs them ---------------------------------------------------------------
# The shapes of vLLM 0.34.0's per-method speculator configs (vllm/v1/worker/gpu/spec_decode/speculator_config.py:
# a table of qualified names, resolve_obj_by_qualname, classmethods inherited along the MRO, ClassVars, a property
# of the config object that builds the speculator's config), written small.

_SPECULATORS = """
import importlib
from typing import ClassVar

_PKG = "code"
_TABLE = {"ngram": f"{_PKG}.NgramConfig", "eagle3": f"{_PKG}.Eagle3Config"}

def resolve_obj_by_qualname(qualname):
    module_name, obj_name = qualname.rsplit(".", 1)
    module = importlib.import_module(module_name)
    return getattr(module, obj_name)

class SpeculatorConfig:
    base_method: ClassVar[str | None] = None
    supported_options: ClassVar[frozenset[str]] = frozenset()
    draft_has_own_vocab: ClassVar[bool] = False

    def __init__(self, spec):
        self.spec = spec

    @classmethod
    def configure(cls, spec):
        spec.lookup = 0

    @property
    def tokens(self):
        return self.spec.k

class NgramConfig(SpeculatorConfig):
    base_method = "ngram"
    supported_options = frozenset({"lookup"})

    @classmethod
    def configure(cls, spec):
        if spec.lookup is None:
            spec.lookup = 5
        if spec.lookup > 8:
            raise ValueError(f"lookup={spec.lookup} must be <= 8")

class Eagle3Config(SpeculatorConfig):
    base_method = "eagle3"

def config_class(spec):
    if spec.method not in _TABLE:
        raise ValueError(f"Unsupported speculative method: {spec.method!r}")
    return resolve_obj_by_qualname(_TABLE[spec.method])
"""


def test_a_class_named_in_a_table_is_found_and_its_inherited_classmethods_played():
    code = _SPECULATORS + """
def setup(spec):
    cls = config_class(spec)
    cls.configure(spec)
    return (cls.base_method, spec.lookup, "lookup" in cls.supported_options)
"""
    ngram = {CLASS: "code:Spec", "method": "ngram", "lookup": None}
    assert played(code, spec=ngram) == ("ngram", 5, True)
    assert ngram["lookup"] == 5  # the object passed is the one the classmethod rewrites
    assert played(code, spec={CLASS: "code:Spec", "method": "eagle3", "lookup": 2}) == ("eagle3", 0, False)
    assert raised(played(code, spec={CLASS: "code:Spec", "method": "ngram", "lookup": 9})) == \
        "ValueError: lookup=9 must be <= 8"
    assert raised(played(code, spec={CLASS: "code:Spec", "method": "medusa"})) == \
        "ValueError: Unsupported speculative method: 'medusa'"


def test_an_object_built_by_its_init_answers_its_class_s_properties_and_class_attributes():
    code = _SPECULATORS + """
def behaviour(spec):
    speculator = config_class(spec)(spec)
    return (speculator.tokens, speculator.draft_has_own_vocab, isinstance(speculator, SpeculatorConfig),
            issubclass(config_class(spec), NgramConfig), isinstance(config_class(spec), type))
"""
    assert played(code, spec={CLASS: "code:Spec", "method": "ngram", "k": 4}) == (4, False, True, True, True)
    assert played(code, spec={CLASS: "code:Spec", "method": "eagle3", "k": 2})[3] is False


def test_a_view_that_forwards_its_attributes_answers_what_it_holds():
    # SGLang 0.5.23 arg_groups/model_override_base.py: ResolvedView stores what it views with object.__setattr__
    # (its own __setattr__ refuses) and answers every other name from it in __getattr__, read back with
    # object.__getattribute__.
    code = """
class Args:
    attn_dp_size: int = 1

class View:
    __slots__ = ("_args", "_overlay")

    def __init__(self, args, overlay=None):
        object.__setattr__(self, "_args", args)
        object.__setattr__(self, "_overlay", overlay or {})

    def __getattr__(self, name):
        overlay = object.__getattribute__(self, "_overlay")
        if name in overlay:
            return overlay[name]
        return getattr(object.__getattribute__(self, "_args"), name)

    def __setattr__(self, name, value):
        raise AttributeError("read-only")

def attn_dp_enabled(args, overlay):
    view = View(args, overlay)
    return view.attn_dp_size > 1
"""
    assert played(code, args={CLASS: "code:Args", "attn_dp_size": 2}, overlay={}) is True
    assert played(code, args={CLASS: "code:Args", "attn_dp_size": 2}, overlay={"attn_dp_size": 1}) is False
    assert isinstance(played(code, args={CLASS: "code:Args"}, overlay={}), Unknown)  # a field it was not given


def test_a_class_is_a_value_of_its_own():
    code = _SPECULATORS + "\ndef pick():\n    return NgramConfig\n"
    assert played(code) == ReleaseClass("code:NgramConfig")
    assert played(_SPECULATORS + "\ndef name():\n    return NgramConfig.__qualname__\n") == "NgramConfig"


def test_a_loop_over_a_known_sequence_is_played_with_break_continue_and_else():
    code = """
    OPTIONS = ("topk", "quantization", "options")

    def first_set(given, supported):
        for option in OPTIONS:
            if option in supported:
                continue
            if given.get(option) is not None:
                raise ValueError(f"{option} is not supported")
        else:
            return "none refused"
    """
    assert raised(played(code, given={"topk": 2}, supported=frozenset())) == "ValueError: topk is not supported"
    assert played(code, given={"topk": 2}, supported=frozenset({"topk"})) == "none refused"
    searched = """
    def detect(name):
        for method, marker in (("eagle", "eagle-"), ("eagle3", "eagle3"), ("dflash", "dflash")):
            if marker in name:
                break
        else:
            method = "draft_model"
        return method
    """
    assert played(searched, name="yuhuili/eagle3-llama") == "eagle3"
    assert played(searched, name="qwen-0.5b") == "draft_model"
    assert isinstance(played(searched), (Unknown, set))  # the name not known: not one answer


def test_a_method_specific_option_check_is_the_same_whatever_its_spelling():
    # `for ... if ...: raise`, `assert` inside the loop, and a helper in the loop: one refusal.
    forms = ["""
    def check(given):
        for option in ("topk", "options"):
            if given.get(option) is not None:
                raise ValueError("unsupported")
    """, """
    def check(given):
        for option in ("topk", "options"):
            assert given.get(option) is None, "unsupported"
    """, """
    def _refuse(given, option):
        if given.get(option) is not None:
            raise ValueError("unsupported")

    def check(given):
        for option in ("topk", "options"):
            _refuse(given, option)
    """]
    for code in forms:
        assert isinstance(played(code, given={"options": {"a": 1}}), Raised), code
        assert played(code, given={}) is None, code


# -- comprehensions, a way stopped at a statement, a refusal's text ----------------------------------------------------


def test_a_comprehension_over_a_known_sequence_is_played_item_by_item():
    code = """
    def renamed(architectures, layers):
        names = [a if a.startswith("DFlash") else f"DFlash{a}" for a in architectures]
        kept = {i + 1 for i in layers if i >= 0}
        pairs = {name: len(name) for name in names}
        return names, kept, pairs, tuple(i * 2 for i in layers), sum([i for i in layers]), any(i > 8 for i in layers)
    """
    assert played(code, architectures=["Qwen3ForCausalLM", "DFlashDraftModel"], layers=[1, -1, 9]) == (
        ["DFlashQwen3ForCausalLM", "DFlashDraftModel"], frozenset({2, 10}),
        {"DFlashQwen3ForCausalLM": 22, "DFlashDraftModel": 16}, (2, -2, 18), 9, True)
    nested = "def flat(rows):\n    return [x for row in rows for x in row if x]"
    assert played(nested, rows=[[1, 0], [2]]) == [1, 2]
    assert isinstance(played(nested, rows=[[1, Unknown("x")]]), Unknown)  # an item not known: not the list
    assert isinstance(played(nested), Unknown)  # nor a sequence not known


def test_a_way_stops_at_the_statement_asked_for_with_the_value_asked_for():
    module = ast.parse(textwrap.dedent("""
    def width(config):
        return config.hidden_size * len(config.layer_ids)

    def build(self, config):
        self.config = config
        if config.use_aux:
            self.fc = Linear(width(self.config), config.hidden_size)
        self.norm = Norm(config.hidden_size)
    """))
    function = module.body[-1]
    assert isinstance(function, ast.FunctionDef)
    built = next(n for n in ast.walk(function) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "self.fc")
    assert isinstance(built.value, ast.Call)
    scope = ModuleScope(_Code(""), module, "code.py")

    def width_built(config: dict[str, Any]) -> Any:
        outcomes, _ = call(function, scope, [], {"config": config}, fields={"self": {}},
                           stop=(built, built.value.args[0]))
        return answer(outcomes, scope.where)

    assert width_built({"use_aux": True, "hidden_size": 4, "layer_ids": [1, 2, 3]}) == 12
    assert width_built({"use_aux": False, "hidden_size": 4}) is None  # no fc built: the function ends as it does
    # The condition not known: one way builds it, the other does not, and the answer says what it could not read.
    assert answer(call(function, scope, [], {"config": {"hidden_size": 4, "layer_ids": [1]}}, fields={"self": {}},
                       stop=(built, built.value.args[0]))[0], scope.where) == Unknown("config.use_aux")


def test_a_refusal_s_text_is_the_raise_s_message_with_what_is_not_known_shown_as_code():
    stmt = ast.parse(textwrap.dedent("""
    if hidden_states.shape[-1] != expected:
        raise ValueError(f"expects {expected} features but received {hidden_states.shape[-1]} ({self.name!r})")
    """)).body[0]
    assert isinstance(stmt, ast.If) and isinstance(stmt.body[0], ast.Raise)
    assert message(stmt.body[0], {"expected": 20480, "hidden_states": {"shape": (7, 16384)}}) == \
        "ValueError: expects 20480 features but received 16384 ({self.name})"
    assert message(stmt.body[0], {}) == \
        "ValueError: expects {expected} features but received {hidden_states.shape[-1]} ({self.name})"


def text_of(code: str, assigned: dict[str, str] | None = None, **values: Any) -> list[str]:
    """The parts the expression ``code`` builds on these values (Player.text); ``assigned``: the code each local
    name was last assigned."""
    earlier = {name: ast.parse(source, mode="eval").body for name, source in (assigned or {}).items()}
    return Player("", {}).text(ast.parse(code, mode="eval").body, values, earlier.get)


@pytest.mark.parametrize("code,values,parts", [
    ('f"got {n=} for {self.method!r}"', {"n": 5}, ["got n=5 for ", "self.method", ""]),
    ('f"{name!r} needs {12288 * 128:,} tokens at {ratio:.2f}"', {"name": "k", "ratio": 0.5},
     ["'k' needs 1,572,864 tokens at 0.50"]),
    ('f"{ratio:.{digits}f}"', {"ratio": 0.5}, ["", "ratio", ""]),  # a spec not known: the value is a hole
    ('"got %d for %-4s%% of %(key)s" % (n, m)', {"n": 5}, ["got 5 for ", "m", "% of ", "key", ""]),
    ('"%5.1f%% and %s" % pair', {"pair": (12.34, "x")}, [" 12.3% and x"]),  # a tuple known: spread as Python does
    ('"got %(n)d of %(m)s" % counts', {"counts": {"n": 3}}, ["got 3 of ", "m", ""]),
    ('"got {} for {1}, {k!r:>5} in {0.name}".format(n, m, k=z)', {"z": "ab"},
     ["got ", "n", " for ", "m", ",  'ab' in ", "n", ""]),
    ('"{} then {}".format(first)', {}, ["", "first", " then ", "arg1", ""]),  # an argument not given: its place
    ('"got " + str(n) + " tokens of " + repr(m)', {"m": "x"}, ["got ", "n", " tokens of 'x'"]),
    ("prefix + '.'", {"prefix": "known"}, ["known."]),  # a str the player knows: its value
    ("self.config.model", {}, ["", "self.config.model", ""]),  # anything else not known: named by its code
    ("f'found {name or \"default\"}'", {}, ["found ", "name or 'default'", ""]),  # not its truth, True
    ("f'method {custom or method!r}'", {"custom": None, "method": "ngram"}, ["method 'ngram'"]),  # known: its value
    ('"got %s" % {"n": n}', {}, ["got ", "{'n': n}", ""]),  # a dict holding what is not known: not known
])
def test_the_text_an_expression_builds_is_literal_parts_and_holes_named_by_their_code(code, values, parts):
    assert text_of(code, **values) == parts


def test_a_local_name_is_read_through_what_it_was_last_assigned_two_assignments_back():
    assigned = {"msg": 'prefix + " is not supported"', "prefix": '"method " + method', "method": '"eagle"'}
    assert text_of("msg", assigned) == ["method ", "method", " is not supported"]  # `method`: a third step back
    assert text_of("prefix", assigned) == ["method eagle"]
    assert text_of("msg", assigned, method="mtp") == ["method mtp is not supported"]


def test_a_refusal_s_text_reads_every_form_of_message_and_is_its_code_where_it_is_one_hole():
    def refusal(code: str, **values: Any) -> str:
        stmt = ast.parse(code).body[0]
        assert isinstance(stmt, ast.Raise)
        return message(stmt, values)

    assert refusal('raise ValueError("got %d layers, want %d" % (n, want))', want=4) == \
        "ValueError: got {n} layers, want 4"
    assert refusal('raise ValueError("need {} heads".format(heads))', heads=8) == "ValueError: need 8 heads"
    assert refusal("raise ValueError(msg)") == "ValueError(msg)"  # no text known but the hole: the raise as written
    assert refusal('raise ValueError(f"of {n // 0} heads")', n=8) == "ValueError(f'of {n // 0} heads')"


def test_a_read_of_what_a_config_lacks_says_which_code_read_it():
    assert played("def f(hf_config):\n    return hf_config.dflash_config", hf_config={}) == \
        Unknown("hf_config.dflash_config")
    assert played("def f(c):\n    return getattr(c, 'dflash_config', None)", c={}) is None  # a default: no read


def test_an_attribute_written_on_an_object_passed_is_the_caller_s():
    code = """
    def _init_token(proposer):
        hf_config = proposer.draft_model_config.hf_config
        if "mask_token_id" in (getattr(hf_config, "dflash_config", None) or {}):
            proposer.token = hf_config.dflash_config["mask_token_id"]
        elif hasattr(hf_config, "pard_token"):
            proposer.token = hf_config.pard_token
        else:
            raise ValueError("no token")

    def token(proposer):
        _init_token(proposer)
        return proposer.token
    """
    proposer = {"draft_model_config": {"hf_config": {"pard_token": 7}}}
    assert played(code, proposer=proposer) == 7 and proposer["token"] == 7
    assert raised(played(code, proposer={"draft_model_config": {"hf_config": {}}})) == "ValueError: no token"
    dflash = {"draft_model_config": {"hf_config": {"dflash_config": {"mask_token_id": 5}}}}
    assert played(code, proposer=dflash) == 5


def test_a_module_level_name_a_function_rebinds_is_not_its_assignment():
    # vLLM's `_current_vllm_config = None`, set by set_current_vllm_config(): not None when a model is built.
    code = """
    _current = None

    def set_current(config):
        global _current
        _current = config

    def get_current():
        if _current is None:
            raise AssertionError("Current vLLM config is not set")
        return _current

    def build():
        return get_current()
    """
    assert isinstance(played(code), Unknown)
    assert raised(played(code.replace("global _current", "pass"))) == "AssertionError: Current vLLM config is not set"


# -- transformers' config objects (play/libraries/transformers.py) -------------------------------------------------

# vLLM 0.34.0 vllm/transformers_utils/configs/eagle.py, EAGLEConfig.__init__ as it wraps a drafter's config for
# DFlash (vllm/v1/worker/gpu/spec_decode/eagle/config.py:17, wrap_eagle_hf_config), cut to what a launch meets.
_EAGLE_CONFIG = """
from transformers import AutoConfig, PreTrainedConfig

class EAGLEConfig(PreTrainedConfig):
    model_type = "eagle"

    def __init__(self, model=None, method="eagle", **kwargs):
        if isinstance(model, dict):
            model_config = AutoConfig.for_model(**model)
        else:
            model_config = model
        for k, v in kwargs.items():
            if k != "architectures" and k != "model_type" and hasattr(model_config, k):
                setattr(model_config, k, v)
        self.model = model_config
        if method == "dflash":
            kwargs["architectures"] = [arch if arch.startswith("DFlash") else f"DFlash{arch}"
                                       for arch in self.model.architectures]
        super().__init__(**kwargs)
        for k, v in self.model.to_dict().items():
            if k not in kwargs:
                setattr(self, k, v)
"""


def test_a_config_wrapped_by_a_transformers_config_class_holds_what_its_init_sets():
    # xpress/config.py:20-28 reads the wrapped config: `getattr(hf_config, "draft_vocab_size", None) or vocab_size`
    code = _EAGLE_CONFIG + """
def wrapped(hf_config):
    config = EAGLEConfig(hf_config, method="dflash", model_type="eagle")
    size = getattr(config, "draft_vocab_size", None) or config.vocab_size
    return (config.architectures, size, config.model_type, isinstance(hf_config, EAGLEConfig),
            isinstance(config, EAGLEConfig), isinstance(hf_config, dict), isinstance(hf_config, PreTrainedConfig))
"""
    drafter = ConfigObject({"architectures": ["Qwen3XPressModel"], "model_type": "qwen3", "vocab_size": 151936})
    assert played(code, hf_config=drafter) == (["DFlashQwen3XPressModel"], 151936, "eagle", False, True, False, True)
    # From a dict (a config.json read as one), through AutoConfig.for_model(**model), the same.
    code = code[:code.index("    return (config.architectures")] + "    return (config.architectures, size)\n"
    assert played(code, hf_config=dict(drafter)) == (["DFlashQwen3XPressModel"], 151936)


def test_a_config_given_attributes_the_scan_did_not_follow_is_not_known_to_lack_one():
    code = """
def f(config, extra):
    for k, v in extra.items():
        setattr(config, k, v)
    return getattr(config, "draft_vocab_size", None)
"""
    assert played(code, config=ConfigObject({"vocab_size": 8}), extra={}) is None
    assert played(code, config=ConfigObject({"vocab_size": 8}), extra={"draft_vocab_size": 4}) == 4
    assert isinstance(played(code, config=ConfigObject({"vocab_size": 8}), extra=UNKNOWN), Unknown)


def test_keywords_spread_and_gathered_reach_the_callee():
    code = """
def inner(a, *rest, b=1, **options):
    return (a, rest, b, options)

def outer(given):
    return inner(1, 2, 3, **given)
"""
    assert played(code, given={"b": 5, "c": 6}) == (1, (2, 3), 5, {"c": 6})
    assert isinstance(played(code, given=UNKNOWN), Unknown)  # a spread not known: not called as if it were empty


class _Package:
    """A few modules read on their own, as a release's package (play.modules.Modules)."""

    def __init__(self, files: dict[str, str]):
        self.trees = {path: ast.parse(textwrap.dedent(source)) for path, source in files.items()}

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None:
        for path, tree in self.trees.items():
            if path.removesuffix(".py").removesuffix("/__init__").replace("/", ".") == name:
                return tree, path
        return None


def test_a_name_a_package_re_exports_by_a_relative_import_is_its_module_s():
    # vllm/transformers_utils/configs/speculators/__init__.py: `from .base import SpeculatorsConfig`
    package = _Package({
        "pkg/configs/__init__.py": "from .base import SpecConfig\n",
        "pkg/configs/base.py": "class SpecConfig:\n    model_type = 'speculators'\n",
        "pkg/use.py": "from pkg.configs import SpecConfig\n\ndef kind():\n    return SpecConfig.model_type\n",
    })
    tree, where = package.module_tree("pkg.use")
    scope = ModuleScope(package, tree, where)
    assert scope.value("SpecConfig") == ReleaseClass("pkg.configs.base:SpecConfig")
    function = tree.body[-1]
    outcomes, _ = call(function, scope, [], {})
    assert outcomes[0].method == "speculators"


def test_any_of_a_generator_bound_to_a_name_is_the_generator_s():
    # vLLM's AutoWeightsLoader._can_ignore_unexpected: `iup = (qualname.endswith(s) for s in ...)`, then `any(iup)`
    code = """
    def ignored(qualname, suffixes):
        iup = (qualname.endswith(s) for s in suffixes)
        return any(iup)
    """
    assert played(code, qualname="fc.bias", suffixes=[".bias"]) is True
    assert played(code, qualname="fc.weight", suffixes=[".bias"]) is False
    assert isinstance(played(code, qualname="fc.weight", suffixes=UNKNOWN), Unknown)
