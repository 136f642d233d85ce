"""Patch bundles on copies of real vLLM trees: BLOCKED -> patch -> READY -> revert -> byte-identical, and the
safety contract (dry run, no-op second apply, drift, RECORD, interrupted writes, lock, ranges)."""

from __future__ import annotations

import fcntl
import hashlib
import py_compile
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specaudit.core.errors import SpecauditError
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.patch.bundles import Locked, OutOfRange, PatchRefused, Shadow, apply, load_bundles, revert, select_bundle, status
from specaudit.scan.audit import scan
from specaudit.tree.locate import locate

from conftest import vllm_tree
from helpers import specaudit

ROOT = Path(__file__).resolve().parents[1]
DEEPSEEK = "vllm/model_executor/models/deepseek_v2.py"


def copy_tree(version: str, tmp_path: Path):
    destination = tmp_path / f"vllm-{version}"
    shutil.copytree(vllm_tree(version).root, destination)
    return locate(str(destination))


def hashes(tree) -> dict[str, str]:
    return {str(p.relative_to(tree.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tree.root.rglob("*")) if p.is_file()}


def verdict(tree, preset: str) -> str:
    return scan(tree, Launch(load_preset(preset))).verdict


@pytest.mark.parametrize("version,ready", [
    # the low end of both bundles' range; Kimi-K2.5 is not registered in 0.14.0, which no patch changes
    ("0.14.0", {"kimi_k2": ["kimi-k2"], "deepseek_v3": ["deepseek-v3"]}),
    ("0.17.0", {"kimi_k2": ["kimi-k2", "kimi-k2.5"], "deepseek_v3": ["deepseek-v3"]}),
    # the high end: 0.17.1 is the last release that needs them; 0.18.0 supports all three targets natively
    ("0.17.1", {"kimi_k2": ["kimi-k2", "kimi-k2.5"], "deepseek_v3": ["deepseek-v3"]}),
])
def test_blocked_patched_ready_reverted_identical(tmp_path, version, ready):
    tree = copy_tree(version, tmp_path)
    before = hashes(tree)
    for target, presets in ready.items():
        assert all(verdict(tree, p) == "BLOCKED" for p in presets)
        pyc = tree.root / "vllm/model_executor/models/__pycache__/deepseek_v2.cpython-311.pyc"
        pyc.parent.mkdir(exist_ok=True)
        pyc.write_bytes(b"stale")
        bundle = select_bundle(load_bundles("vllm"), target, tree.version)
        outcome = apply(tree, bundle)
        expected = {"vllm/config/speculative.py", DEEPSEEK}
        if target == "kimi_k2" and version != "0.14.0":  # Kimi-K2.5's class exists from 0.15.0
            expected |= {"vllm/model_executor/models/kimi_k25.py", "vllm/v1/spec_decode/eagle.py"}
        assert set(outcome.changed) == expected
        for relpath in outcome.changed:
            py_compile.compile(str(tree.root / relpath), doraise=True, cfile=str(tmp_path / "check.pyc"))
        assert not pyc.exists()  # stale bytecode of a rewritten module is gone
        for preset in presets:
            assert verdict(tree, preset) == "READY", preset
        assert "already applied" in apply(tree, bundle).message
        reverted = revert(tree)
        assert set(reverted.changed) == set(outcome.changed)
        after = hashes(tree)
        assert after == {k: v for k, v in before.items()}, "revert is not byte-identical"


def test_dry_run_prints_the_diff_and_changes_nothing(tmp_path):
    tree = copy_tree("0.17.0", tmp_path)
    before = hashes(tree)
    outcome = apply(tree, select_bundle(load_bundles("vllm"), "kimi_k2", tree.version), dry_run=True)
    assert "+            \"kimi_k2\",\n" in outcome.diff  # the allowlist, in its own one-per-line style
    assert '+            elif self.get_model_name(target_model) in ("KimiK25ForConditionalGeneration",):' in outcome.diff
    assert "target_model.config.media_placeholder_token_id" in outcome.diff
    assert "SupportsEagle3" in outcome.diff and "aux_hidden_states" in outcome.diff
    assert hashes(tree) == before


def test_ranges_are_refused_outside_and_name_the_bundles(tmp_path):
    bundles = load_bundles("vllm")
    for version in ("0.11.0", "0.18.0", "0.33.0"):
        with pytest.raises(OutOfRange, match=r"no bundle for kimi_k2 covers release .*vllm-eagle3-kimi-k2: <0.18.0,>=0.14.0"):
            select_bundle(bundles, "kimi_k2", version)
    with pytest.raises(SpecauditError, match="known targets: deepseek_v3, kimi_k2"):
        select_bundle(bundles, "llama", "0.17.0")
    proc = specaudit("patch", str(vllm_tree("0.33.0").root), "--target", "kimi_k2", "--dry-run",
                     env_cache=tmp_path / "cache")
    assert proc.returncode == 5 and "no bundle for kimi_k2 covers release 0.33.0" in proc.stderr


def test_drift_is_refused_with_a_diff_unless_forced(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    bundle = select_bundle(load_bundles("vllm"), "kimi_k2", tree.version)
    apply(tree, bundle)
    patched = tree.root / DEEPSEEK
    patched.write_text(patched.read_text() + "\n# edited by hand\n")
    with pytest.raises(PatchRefused, match="changed since specaudit patched it") as refused:
        revert(tree)
    assert "+# edited by hand" in str(refused.value)
    rows = {row.relpath: row.state for row in status(tree)[1]}
    assert rows[DEEPSEEK] == "drifted"
    revert(tree, force=True)
    assert hashlib.sha256(patched.read_bytes()).hexdigest() == hashlib.sha256(
        (vllm_tree("0.14.0").root / DEEPSEEK).read_bytes()).hexdigest()


def test_a_file_that_differs_from_the_wheel_record_is_refused(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    target = tree.root / DEEPSEEK
    target.write_text(target.read_text() + "\n# a local fix\n")
    bundle = select_bundle(load_bundles("vllm"), "kimi_k2", tree.version)
    with pytest.raises(PatchRefused, match="differs from what the wheel installed"):
        apply(tree, bundle)
    rows = {row.relpath: row.state for row in status(tree)[1]}
    assert rows == {DEEPSEEK: "foreign"}  # --status tells specaudit's changes from others'
    proc = specaudit("patch", str(tree.root), "--target", "kimi_k2", env_cache=tmp_path / "cache")
    assert proc.returncode == 4 and proc.stderr.startswith("specaudit: error:")


def test_an_interrupted_write_restores_every_file(tmp_path, monkeypatch):
    import specaudit.patch.bundles as patch_module

    tree = copy_tree("0.14.0", tmp_path)
    before = hashes(tree)
    real_replace = patch_module._replace
    calls = []

    def interrupted(path, data):
        calls.append(path)
        if len(calls) == 2:  # Ctrl-C after the first file was written
            raise KeyboardInterrupt
        real_replace(path, data)

    monkeypatch.setattr(patch_module, "_replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply(tree, select_bundle(load_bundles("vllm"), "kimi_k2", tree.version))
    monkeypatch.setattr(patch_module, "_replace", real_replace)
    assert hashes(tree) == before


KILL_AFTER_FIRST_FILE = """
import os, signal, sys
import specaudit.patch.bundles as p
from specaudit.tree.locate import locate
real = p._replace
count = []
def replace(path, data):
    real(path, data)
    if str(path).startswith(sys.argv[1]):  # a file of the tree, not the shadow's copies
        count.append(path)
    if len(count) == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # killed between two files
p._replace = replace
tree = locate(sys.argv[1])
p.apply(tree, p.select_bundle(p.load_bundles("vllm"), "kimi_k2", tree.version))
"""


def test_a_killed_apply_is_rolled_back_by_the_next_run(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    before = hashes(tree)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()),
           "SPECAUDIT_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_FILE, str(tree.root)], env=env, timeout=600)
    assert proc.returncode == -signal.SIGKILL
    assert hashes(tree) != before  # one file was written when the kill came
    proc = specaudit("patch", str(tree.root), "--revert", env_cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "rolled back an interrupted run" in proc.stdout
    assert hashes(tree) == before


def test_a_second_run_is_refused_while_one_holds_the_lock(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    with open(Shadow(tree).dir / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(Locked, match="another specaudit patch is running"):
            revert(tree)


def test_bundle_ranges_do_not_overlap_and_cover_the_releases_that_need_them():
    bundles = load_bundles("vllm")
    # scanned: every release from 0.14.0 to 0.17.1 is BLOCKED for these targets, 0.18.0 to 0.33.0 READY
    assert {(b.target, str(b.versions)) for b in bundles} == {
        ("kimi_k2", "<0.18.0,>=0.14.0"), ("deepseek_v3", "<0.18.0,>=0.14.0")}


def test_a_bundle_whose_preconditions_no_longer_hold_retires_itself(tmp_path):
    # The tree already has the changes (as upstream releases do), but not through specaudit: every
    # precondition fails, nothing is written, and the message says where upstream has it.
    tree = copy_tree("0.17.0", tmp_path)
    bundle = select_bundle(load_bundles("vllm"), "kimi_k2", tree.version)
    apply(tree, bundle)
    shutil.rmtree(Shadow(tree).dir)
    before = hashes(tree)
    outcome = apply(tree, bundle)
    assert "is not needed" in outcome.message and "0.18.0" in outcome.message
    assert hashes(tree) == before


def test_the_shadow_history_records_every_step_outside_the_tree(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    bundle = select_bundle(load_bundles("vllm"), "deepseek_v3", tree.version)
    apply(tree, bundle, dry_run=True)
    shadow = Shadow(tree)
    assert not (shadow.dir / ".git").exists()  # a dry run writes no history
    apply(tree, bundle)
    revert(tree)
    messages = [c.message for c in shadow.repo.iter_commits()]
    assert messages == ["revert vllm-eagle3-deepseek-v3",
                        "apply vllm-eagle3-deepseek-v3: allowlist, deepseek-aux-hidden-states, deepseek-supports-eagle3",
                        "pristine copies before vllm-eagle3-deepseek-v3"]
    assert not str(shadow.dir).startswith(str(tree.root))
    assert (shadow.dir / "pristine" / DEEPSEEK).read_bytes() == (vllm_tree("0.14.0").root / DEEPSEEK).read_bytes()


def test_a_file_edited_after_a_revert_is_not_silently_reverted_to_an_old_copy(tmp_path):
    tree = copy_tree("0.14.0", tmp_path)
    bundle = select_bundle(load_bundles("vllm"), "deepseek_v3", tree.version)
    apply(tree, bundle)
    revert(tree)
    edited = tree.root / DEEPSEEK
    edited.write_text(edited.read_text() + "\n# edited after the revert\n")
    with pytest.raises(PatchRefused, match="differs from what the wheel installed"):
        apply(tree, bundle)  # the RECORD still tells the edit apart
    apply(tree, bundle, force=True)
    revert(tree)
    assert edited.read_text().endswith("# edited after the revert\n")  # the edit is what comes back


def test_a_kill_at_every_step_of_apply_and_revert_leaves_a_tree_the_next_run_recovers(tmp_path):
    # patch.py marks each boundary between two durable writes (the state saved, the journal written, each file
    # replaced, the journal removed); SPECAUDIT_TEST_KILL_AT_STEP=N kills the process there, as kill -9 would.
    tree = copy_tree("0.14.0", tmp_path)
    cache = tmp_path / "cache"
    before = hashes(tree)
    assert specaudit("patch", str(tree.root), "--target", "kimi_k2", env_cache=cache).returncode == 0
    applied = hashes(tree)
    assert specaudit("patch", str(tree.root), "--revert", env_cache=cache).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "SPECAUDIT_CACHE": str(cache)}
    for command, start in ((["--target", "kimi_k2"], before), (["--revert"], applied)):
        for step in range(1, 40):
            if start == applied:
                assert specaudit("patch", str(tree.root), "--target", "kimi_k2", env_cache=cache).returncode == 0
            proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "patch", str(tree.root), *command],
                                  env={**env, "SPECAUDIT_TEST_KILL_AT_STEP": str(step)}, capture_output=True,
                                  text=True, timeout=600)
            finished = proc.returncode == 0
            assert finished or proc.returncode == -signal.SIGKILL, proc.stderr
            # The next run recovers: the tree is wholly as it was or wholly as the command leaves it, and the
            # state agrees (no file "drifted" or "foreign").
            listing = specaudit("patch", str(tree.root), "--status", env_cache=cache)
            assert listing.returncode == 0, listing.stderr
            assert "foreign" not in listing.stdout and "drifted" not in listing.stdout, (step, listing.stdout)
            assert hashes(tree) in (before, applied), step
            assert specaudit("patch", str(tree.root), "--revert", env_cache=cache).returncode == 0
            assert hashes(tree) == before, step
            if finished:
                break
        else:
            pytest.fail(f"patch {' '.join(command)} never finished")
        assert step > 3  # it was killed at several steps before it finished


def test_a_scan_of_a_patched_tree_says_so_in_its_provenance(tmp_path):
    tree = copy_tree("0.17.0", tmp_path)
    assert scan(tree, Launch(load_preset("kimi-k2"))).provenance.modified == ()
    bundle = select_bundle(load_bundles("vllm"), "kimi_k2", tree.version)
    changed = apply(tree, bundle).changed
    provenance = scan(tree, Launch(load_preset("kimi-k2"))).provenance
    assert provenance.bundles == (bundle.id,)
    assert "vllm/config/speculative.py" in provenance.modified and set(provenance.modified) <= set(changed)
    planned = scan(vllm_tree("0.17.0"), Launch(load_preset("kimi-k2")),
                   overlay={"vllm/config/speculative.py": b"# edited\n"}).provenance
    assert planned.in_memory == ("vllm/config/speculative.py",) and planned.bundles == ()
