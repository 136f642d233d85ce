"""The atlas through the command line, on a ten-line engine tree of our own (no network): `specaudit atlas` builds it
into the cache, explain --tree locates a pasted line in it, and a tree that changes is another atlas."""

from __future__ import annotations

import json
import textwrap

from helpers import specaudit

SPECULATIVE = textwrap.dedent('''
    class SpeculativeConfig:
        method: str = "eagle3"
        num_speculative_tokens: int = 1

        def __post_init__(self):
            if self.num_speculative_tokens > 4 and self.method == "eagle3":
                raise ValueError(f"EAGLE-3 drafts at most 4 tokens here, got {self.num_speculative_tokens}")
''')


def tree(root, version="0.0.1", source=SPECULATIVE):
    (root / "vllm" / "config").mkdir(parents=True, exist_ok=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "config" / "speculative.py").write_text(source)
    (root / f"vllm-{version}.dist-info").mkdir(exist_ok=True)
    (root / f"vllm-{version}.dist-info" / "METADATA").write_text(f"Name: vllm\nVersion: {version}\n\n")
    return root


def test_the_atlas_command_builds_once_and_explain_locates_a_pasted_line_with_its_fix(tmp_path):
    engine, cache = tree(tmp_path / "tree"), tmp_path / "cache"
    built = specaudit("atlas", str(engine), env_cache=cache)
    assert built.returncode == 0, built.stderr
    assert "vllm 0.0.1: 1 templates" in built.stdout and "built in" in built.stdout
    assert "cached in" in specaudit("atlas", str(engine), env_cache=cache).stdout
    paste = tmp_path / "paste.log"
    paste.write_text("ValueError: EAGLE-3 drafts at most 4 tokens here, got 7\n")
    proc = specaudit("explain", str(paste), "--tree", str(engine), "--format", "json", "--out", str(tmp_path / "o"),
                     env_cache=cache)
    assert proc.returncode == 1, proc.stderr
    root = json.loads((tmp_path / "o" / "explain-paste.log.json").read_text())["root"]
    assert root["by"] == "raise site"
    site = root["located"]["sites"][0]
    assert (site["file"], site["line"], site["function"]) == ("vllm/config/speculative.py", 8,
                                                              "SpeculativeConfig.__post_init__")
    assert site["guard"] == 'self.num_speculative_tokens > 4 and self.method == "eagle3"'
    assert root["located"]["holes"] == [["self.num_speculative_tokens", "7"]]
    assert root["located"]["fixes"] == ['--speculative-config key "num_speculative_tokens": at most 4 '
                                        "(self.num_speculative_tokens is 7 here)",
                                        "--speculative-config key \"method\": other than 'eagle3'"]
    assert "--speculative-config key" in proc.stdout and "guard:" in proc.stdout


def test_a_tree_whose_content_changes_is_built_again(tmp_path):
    engine, cache = tree(tmp_path / "tree"), tmp_path / "cache"
    specaudit("atlas", str(engine), env_cache=cache)
    tree(engine, source=SPECULATIVE + '\nraise RuntimeError("a second message of the release")\n')
    again = specaudit("atlas", str(engine), env_cache=cache)
    assert "vllm 0.0.1: 2 templates" in again.stdout and "built in" in again.stdout
    assert len(list((cache / "atlas").glob("vllm-0.0.1-*.json.gz"))) == 2  # keyed by content: the old one stands


def test_a_hostile_tree_a_fifo_or_a_dangling_link_named_py_is_left_out(tmp_path):
    import os

    engine, cache = tree(tmp_path / "tree"), tmp_path / "cache"
    os.mkfifo(engine / "vllm" / "pipe.py")  # read, it would block the build forever
    (engine / "vllm" / "gone.py").symlink_to(tmp_path / "nowhere.py")
    built = specaudit("atlas", str(engine), env_cache=cache)
    assert built.returncode == 0 and "vllm 0.0.1: 1 templates" in built.stdout, built.stderr
