"""The templates of engine code, code in and templates out (templates.py, messages.py): each form of message the
engines write, its holes, its guard and what would make the guard false."""

from __future__ import annotations

import re
import textwrap

import pytest

from specaudit.explain.messages import pattern_of
from specaudit.explain.templates import file_templates


def templates(code: str):
    return file_templates(textwrap.dedent(code).encode())[0]


@pytest.mark.parametrize(("code", "parts"), [
    ('raise ValueError(f"got {n=} for {self.method!r}")', ("got n=", "n", " for ", "self.method", "")),
    ('raise ValueError("got %d for %s" % (n, m))', ("got ", "n", " for ", "m", "")),
    ('raise ValueError("got {} for {m}".format(n, m=method))', ("got ", "n", " for ", "method", "")),
    ('raise ValueError("got " + str(n) + " tokens")', ("got ", "n", " tokens")),
    ('raise ValueError("100%% of the %(what)s" % {"what": w})', ("100% of the ", "what", "")),
    ('msg = f"bad value {x}"\nraise ValueError(msg)', ("bad value ", "x", "")),
    ('logger.warning("Defaulted to %s for suffix decoding.", n)', ("Defaulted to ", "n", " for suffix decoding.")),
    ('assert x > 0, f"need positive x, got {x}"', ("need positive x, got ", "x", "")),
    # what the source writes out is printed as Python prints it
    ('logger.warning("Overriding the size to %d for %s.", 1024, mode)', ("Overriding the size to 1024 for ", "mode", ".")),
    ('raise ValueError(f"kv_len must be < {12288 * 128} tokens, got {n}")', ("kv_len must be < 1572864 tokens, got ", "n", "")),
])
def test_each_form_of_message_becomes_literal_parts_and_named_holes(code, parts):
    (template,) = templates(code)
    assert template.parts == parts


def test_a_message_that_is_all_holes_or_has_no_words_is_no_template():
    assert templates('raise ValueError(msg)\nraise ValueError(f"{a}: {b}")\nraise KeyError(name)') == []


def test_the_guard_is_the_innermost_test_negated_in_its_else_and_remedies_say_what_makes_it_false():
    raised, otherwise, asserted = templates("""
        class SpeculativeConfig:
            def check(self):
                if self.num_speculative_tokens > 1 and self.method == "eagle":
                    raise ValueError(f"EAGLE takes one token, got {self.num_speculative_tokens}")
                if self.method in ("eagle3", "mtp"):
                    pass
                else:
                    raise NotImplementedError(f"method {self.method} is not supported")
                assert self.model is not None, "a speculative model is needed"
    """)
    assert (raised.kind, raised.exception, raised.function) == ("raise", "ValueError", "SpeculativeConfig.check")
    assert raised.guard == 'self.num_speculative_tokens > 1 and self.method == "eagle"'
    assert raised.remedies == (("self.num_speculative_tokens", "at most 1"), ("self.method", "other than 'eagle'"))
    assert otherwise.guard == 'not (self.method in ("eagle3", "mtp"))'
    assert otherwise.remedies == (("self.method", "one of ('eagle3', 'mtp')"),)
    assert asserted.guard == "not (self.model is not None)" and asserted.remedies == (("self.model", "set"),)


def test_an_except_clause_is_the_guard_and_lines_are_the_raise_statements():
    (template,) = templates("""
        try:
            x = table[key]
        except KeyError:
            raise RuntimeError(
                f"no entry for {key}"
            ) from None
    """)
    assert template.guard == "except KeyError" and template.line == 5


def test_the_pattern_of_parts_matches_the_printed_message_and_names_the_holes():
    (template,) = templates('raise ValueError(f"num_speculative_tokens:{n} must be divisible by {n_predict=}")')
    found = re.fullmatch(pattern_of(template.parts), "num_speculative_tokens:5 must be divisible by n_predict=3")
    assert found is not None and (found["h0"], found["h1"]) == ("5", "3")


def test_the_fields_of_the_flag_classes_are_read():
    _, fields = file_templates(b"class EngineArgs:\n    model: str = 'x'\n    max_model_len: int | None = None\n")
    assert fields == {"EngineArgs": ["model", "max_model_len"]}


def test_a_guard_over_several_lines_is_one_line_without_the_breaks_brackets_and_commas():
    (template,) = templates("""
        if cfg.speculative_algorithm not in (
            "EAGLE",
            "DSPARK",
        ):
            raise ValueError("Only EAGLE and DSPARK speculative algorithms are supported")
    """)
    assert template.guard == "cfg.speculative_algorithm not in ('EAGLE', 'DSPARK')"
