"""The player of engine code (specaudit/play/), code in and answer out, in the spirit of pyflakes' ``flakes(code,
*messages)``: ``played(code, **parameters)`` plays the last function of a few lines of engine-shaped code on the
values given and says what it returns, or what it raises. No tree, no network."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import pytest

from specaudit.play.libraries.environ import declared_default, truthy
from specaudit.play.operators import MAX_VALUE_CHARS, binary, compare, plain_method, pure
from specaudit.play.player import MAX_CALLS, Player, call
from specaudit.play.values import CLASS, UNKNOWN, EngineObject, Raised, Unknown, truth


class _Module:
    """A few lines of code read on their own (play.player.Scope): their constants and their functions."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.where = "<code>"
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.constants = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name)}

    def literals(self, name: str) -> set[str] | None:
        found = self.constants.get(name)
        return set(found) if isinstance(found, (set, frozenset, tuple, list)) else None

    def value(self, name: str) -> Any:
        return self.constants.get(name, UNKNOWN)

    def function(self, name: str) -> tuple[ast.FunctionDef, _Module] | None:
        found = self.functions.get(name)
        return (found, self) if found is not None else None

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        return UNKNOWN


def played(code: str, **parameters: Any) -> Any:
    """What the last function of ``code`` gives on these parameters (the rest: their defaults, else unknown): its
    value where every way returns the same, the Raised where every way raises, else the set of what the ways give."""
    module = _Module(ast.parse(textwrap.dedent(code)))
    function = list(module.functions.values())[-1]
    outcomes, _ = call(function, module, [], parameters)
    results = {Raised(o.error or "") if o.raises else o.method for o in outcomes}
    if all(o.raises for o in outcomes):
        return Raised(outcomes[0].error or "")
    returned = [o.method for o in outcomes if not o.raises]
    if len(returned) == len(outcomes) and all(r == returned[0] for r in returned):
        return returned[0]
    return results


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
