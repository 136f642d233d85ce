"""A hostile tree, hostile patch state, planted symlinks: nothing is written outside the directories specaudit means,
and nothing is restored that the journal does not vouch for. Each case: the exit code, one line on stderr with no
traceback, and the files outside left as they were."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specaudit.core.cache import inside, slug
from specaudit.core.errors import SpecauditError
from specaudit.patch.bundles import PatchRefused, Shadow
from specaudit.tree.locate import locate

from conftest import vllm_tree
from helpers import assert_one_line_error, specaudit

ROOT = Path(__file__).resolve().parents[1]
BAD_INPUT, DRIFT = 2, 4


SANDBOX = Path(__file__).parent / "sandbox"  # its sitecustomize.py logs every path a command writes


def run_recorded(tmp_path: Path, args: list[str], allowed: list[Path], env: dict[str, str] | None = None,
                 timeout: float = 600) -> subprocess.CompletedProcess:
    """The CLI with every path it writes recorded (tests/sandbox/sitecustomize.py); a path outside ``allowed`` (and
    the cache) fails the test. Two nets besides: the sandbox ``tmp_path`` is compared before and after, outside those
    directories (what a child that is not Python writes: git, ssh), and the temporary directory the command is given
    must be empty when it ends (a temporary file is no leftover of the user's)."""
    log, scratch = tmp_path / "writes.log", tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    roots = [Path(a).resolve() for a in [*allowed, tmp_path / "cache", scratch]]
    before = _listing(tmp_path, [*roots, log])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SANDBOX}:{ROOT}", "HOME": str(tmp_path / "home"),
           "SPECAUDIT_CACHE": str(tmp_path / "cache"), "SPECAUDIT_WRITE_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1",
           "TMPDIR": str(scratch), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    written = log.read_text().splitlines() if log.exists() else []
    outside = sorted({w for w in written if w != os.devnull and not any(Path(os.path.realpath(w)).is_relative_to(r)
                                                                          for r in roots)})
    assert not outside, outside
    assert _listing(tmp_path, [*roots, log]) == before
    assert not list(scratch.iterdir()), list(scratch.iterdir())
    return proc


def _listing(directory: Path, skipped: list[Path]) -> dict[str, tuple[int, int]]:
    """Every path under ``directory`` but those under ``skipped``, with its size and modification time."""
    found = {}
    for folder, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not any(Path(folder, d).resolve().is_relative_to(s) for s in skipped)]
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if not any(path.resolve().is_relative_to(s) for s in skipped):
                st = path.lstat()
                found[str(path)] = (st.st_size if not path.is_dir() else 0, st.st_mtime_ns if not path.is_dir() else 0)
    return found


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def snapshot(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink()}


def small_tree(root: Path, version: str) -> Path:
    package = root / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text("X = 1\n")
    info = root / "vllm-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
    return root


# -- names built from input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["patch", "--status"], ["patch", "--revert"], ["scan", "--format", "json"]])
def test_a_version_that_climbs_out_of_the_cache_is_refused(tmp_path, command):
    # provenance.py built the patch state's directory from METADATA's Version: `0/../../../..<tree>/.s` put the
    # state (and the lock) inside the tree, and the scan's report outside --out.
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = small_tree(tmp_path / "tree", f"0/../../../..{tmp_path}/outside/.s")
    before = snapshot(tmp_path)
    verb, *flags = command
    out = ["--out", str(tmp_path / "reports")] if verb == "scan" else []
    proc = run_recorded(tmp_path, [verb, str(tree), *flags, *out], allowed=[tmp_path / "reports"])
    assert proc.returncode == BAD_INPUT
    assert "is not a PEP 440 version" in one_line(proc)
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(("cache/", "reports/", "writes.log"))}
    assert after == before and not list(outside.iterdir())


@pytest.mark.parametrize("spelled", ["v0.17.0", "0.17.00"])
def test_versions_are_named_as_pep_440_writes_them(tmp_path, spelled):
    tree = locate(str(small_tree(tmp_path / "t", spelled)))
    assert tree.version == "0.17.0"


def test_two_dist_infos_that_disagree_are_refused_unless_the_source_says_which(tmp_path):
    tree = small_tree(tmp_path / "t", "0.17.0")
    stale = tree / "vllm-0.14.0.dist-info"
    stale.mkdir()
    (stale / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.14.0\n\n")
    with pytest.raises(SpecauditError, match="remove the stale one"):
        locate(str(tree))
    (tree / "vllm" / "_version.py").write_text("__version__ = version = '0.17.0'\n")
    assert locate(str(tree)).version == "0.17.0"


@pytest.mark.parametrize("text, safe", [("../../etc", "etc"), ("..", "-"), ("a/b", "a-b"), ("0.10.1+cpu", "0.10.1-cpu"),
                                        ("kimi-k2.5", "kimi-k2.5")])
def test_a_name_component_built_from_input_is_one_safe_component(text, safe):
    assert slug(text) == safe


def test_a_path_that_resolves_outside_its_directory_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    with pytest.raises(SpecauditError, match="outside"):
        inside(tmp_path / "out", tmp_path / "out" / "link" / "x.json")
    assert inside(tmp_path / "out", tmp_path / "out" / "x.json")


# -- symlinks planted where specaudit writes -----------------------------------------------------------------------


def test_a_symlink_planted_at_a_reports_name_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "reports"
    out.mkdir()
    (out / "scan-vllm-0.0.1-llama3.json").symlink_to(victim)
    tree = small_tree(tmp_path / "tree", "0.0.1")
    proc = run_recorded(tmp_path, ["scan", str(tree), "--target", "llama3", "--format", "json", "--out", str(out)],
                        allowed=[out])
    assert proc.returncode in (1, 3), proc.stderr  # a tree with no engine code in it: not READY
    assert victim.read_text() == "keep me\n"
    report = out / "scan-vllm-0.0.1-llama3.json"
    assert report.is_file() and not report.is_symlink() and json.loads(report.read_text())["verdict"]


# -- patch state the journal does not vouch for --------------------------------------------------------------------


def planted_journal(tmp_path: Path, restore: dict, hashes: dict | None, copies: dict[str, bytes]) -> Shadow:
    tree = locate(str(small_tree(tmp_path / "tree", "0.0.1")))
    shadow = Shadow(tree)
    for relpath, data in copies.items():
        (shadow.dir / "pristine" / relpath).parent.mkdir(parents=True, exist_ok=True)
        (shadow.dir / "pristine" / relpath).write_bytes(data)
    entries = {"restore": restore, "state": {"bundles": {}, "files": {}}}
    if hashes is not None:
        entries["hashes"] = hashes
    shadow.journal.write_text(json.dumps(entries))
    return shadow


def test_recovery_never_writes_through_a_symlink_in_the_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.py").write_text("precious\n")
    shadow = planted_journal(tmp_path, {"vllm/link/precious.py": "pristine"},
                             {"vllm/link/precious.py": {"copy": hashlib.sha256(b"planted\n").hexdigest()}},
                             {"vllm/link/precious.py": b"planted\n"})
    (shadow.tree.root / "vllm" / "link").symlink_to(outside)
    with pytest.raises(PatchRefused, match="symlink"):
        shadow.recover()
    assert (outside / "precious.py").read_text() == "precious\n"


@pytest.mark.parametrize("restore, hashes", [
    ({"vllm/config.py": "pristine"}, None),  # a journal without hashes: nothing vouches for the copy
    ({"vllm/config.py": "pristine"}, {"vllm/config.py": {"copy": "0" * 64}}),  # the copy is not the one hashed
    ({"../outside.py": "pristine"}, {"../outside.py": {"copy": hashlib.sha256(b"x").hexdigest()}}),
    ({"vllm/config.py": "newest"}, {}),  # a kind that is no copy's
])
def test_recovery_restores_nothing_the_journal_does_not_vouch_for(tmp_path, restore, hashes):
    shadow = planted_journal(tmp_path, restore, hashes, {"vllm/config.py": b"planted\n"})
    with pytest.raises(PatchRefused):
        shadow.recover()
    assert (shadow.tree.root / "vllm" / "config.py").read_text() == "X = 1\n"


def test_stale_git_locks_of_a_killed_commit_are_cleared_under_specaudits_own_lock(tmp_path):
    tree = locate(str(small_tree(tmp_path / "tree", "0.0.1")))
    shadow = Shadow(tree)
    shadow.save(shadow.state, {}, "first")
    (shadow.dir / ".git" / "refs" / "heads" / "master.lock").write_text("")
    (shadow.dir / ".git" / "index.lock").write_text("")
    shadow.save({**shadow.state, "bundles": {"x": {}}}, {}, "second")  # GitPython refuses to commit past either
    assert not list((shadow.dir / ".git").rglob("*.lock"))


def test_an_edit_after_a_killed_apply_is_not_overwritten_by_status(tmp_path):
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "SPECAUDIT_CACHE": str(cache)}
    # Steps (patch/bundles.py's _crash_point): the pristine copies saved (1), the journal written (2), the first
    # file replaced (3): the kill leaves a journal and one file of the bundle written.
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "patch", str(destination), "--target", "kimi_k2"],
                          env={**env, "SPECAUDIT_TEST_KILL_AT_STEP": "3"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr
    (journal,) = cache.glob("patches/*/journal.json")
    (written, *_) = json.loads(journal.read_text())["restore"]
    edited = destination / written
    edited.write_text(edited.read_text() + "# my own edit\n")
    proc = specaudit("patch", str(destination), "--status", env_cache=cache)
    assert proc.returncode == DRIFT and "--force" in one_line(proc)
    assert edited.read_text().endswith("# my own edit\n")
    proc = specaudit("patch", str(destination), "--revert", "--force", env_cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert hashlib.sha256(edited.read_bytes()).hexdigest() == \
        hashlib.sha256((vllm_tree("0.14.0").root / written).read_bytes()).hexdigest()


def test_a_patched_file_deleted_by_hand_is_put_back_by_revert(tmp_path):
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    assert specaudit("patch", str(destination), "--target", "kimi_k2", env_cache=cache).returncode == 0
    (state,) = cache.glob("patches/*/state.json")
    gone = destination / sorted(json.loads(state.read_text())["files"])[0]
    os.unlink(gone)
    gone.mkdir()  # replaced by a directory: said, and refused in one line until it is moved aside
    listing = specaudit("patch", str(destination), "--status", env_cache=cache)
    assert listing.returncode == 0 and "deleted, or no" in listing.stdout, listing.stdout + listing.stderr
    proc = specaudit("patch", str(destination), "--revert", env_cache=cache)
    assert proc.returncode == DRIFT and "is a directory now" in one_line(proc)
    gone.rmdir()
    listing = specaudit("patch", str(destination), "--status", env_cache=cache)
    assert listing.returncode == 0 and "deleted" in listing.stdout, listing.stdout + listing.stderr
    proc = specaudit("patch", str(destination), "--revert", env_cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert gone.read_bytes() == (vllm_tree("0.14.0").root / gone.relative_to(destination)).read_bytes()


def test_revert_refuses_a_damaged_pristine_copy(tmp_path):
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    assert specaudit("patch", str(destination), "--target", "kimi_k2", env_cache=cache).returncode == 0
    (copy, *_) = sorted(cache.glob("patches/*/pristine/**/*.py"))
    copy.write_text("damaged\n")
    before = snapshot(destination)
    proc = specaudit("patch", str(destination), "--revert", env_cache=cache)
    assert proc.returncode == DRIFT and "damaged" in one_line(proc)
    assert snapshot(destination) == before  # nothing half-reverted


# -- inputs that used to end in a traceback ------------------------------------------------------------------------


def test_an_integer_past_pythons_digit_limit_is_one_line(tmp_path):
    huge = "9" * 5000
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(f'{{"architectures": ["LlamaForCausalLM"], "vocab_size": {huge}}}')
    for args in (["--model", str(model)],
                 ["--target", "llama3", "--speculative-config", f'{{"num_speculative_tokens": {huge}}}']):
        proc = specaudit("scan", str(small_tree(tmp_path / f"t{len(args)}", "0.0.1")), *args, env_cache=tmp_path / "c")
        assert proc.returncode == BAD_INPUT, proc.stderr
        one_line(proc)


def test_a_module_nested_past_what_ast_can_parse_is_skipped_not_a_crash(tmp_path):
    tree = small_tree(tmp_path / "tree", "0.0.1")
    (tree / "vllm" / "config.py").write_text("x = " + "2**" * 3000 + "2\n")
    proc = specaudit("scan", str(tree), "--target", "llama3", env_cache=tmp_path / "cache")
    assert "Traceback" not in proc.stderr and proc.returncode in (1, 3), proc.stderr


def test_sigterm_during_an_apply_rolls_back_like_ctrl_c(tmp_path):
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    before = snapshot(destination)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()),
           "SPECAUDIT_CACHE": str(tmp_path / "cache")}
    # The kill hook stops the process at the first file write (step 3) with SIGTERM instead of SIGKILL.
    script = ("import os, signal, specaudit.patch.bundles as b\n"
              "b._crash_point = lambda n=[0]: (n.__setitem__(0, n[0] + 1), n[0] == 3 and os.kill(os.getpid(), signal.SIGTERM))\n"
              "import sys; sys.argv = ['specaudit', 'patch', sys.argv[1], '--target', 'kimi_k2']\n"
              "from specaudit.cli import main; main()\n")
    proc = subprocess.run([sys.executable, "-c", script, str(destination)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 130, proc.stderr
    assert "rolled back" in one_line(proc)
    assert snapshot(destination) == before
    assert not list(destination.rglob("*.specaudit-tmp"))


def test_a_full_disk_mid_apply_rolls_back_in_one_line(tmp_path):
    # It ended in two tracebacks and a mixed tree with temporary files left. Here the second engine file's write goes
    # to /dev/full (a real ENOSPC from the write, after its temporary file was made), as a disk that fills up does.
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    before = snapshot(destination)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()),
           "SPECAUDIT_CACHE": str(tmp_path / "cache")}
    script = ("import os, sys, tempfile\n"
              "real, n, tree = tempfile.mkstemp, [0], sys.argv[1]\n"
              "def full(*a, **k):\n"
              "    fd, name = real(*a, **k)\n"
              "    if str(k.get('dir', '')).startswith(tree + '/vllm/'):\n"
              "        n[0] += 1\n"
              "        if n[0] == 2:\n"
              "            os.close(fd)\n"
              "            return os.open('/dev/full', os.O_WRONLY), name\n"
              "    return fd, name\n"
              "tempfile.mkstemp = full\n"
              "sys.argv = ['specaudit', 'patch', sys.argv[1], '--target', 'kimi_k2']\n"
              "from specaudit.cli import main; main()\n")
    proc = subprocess.run([sys.executable, "-c", script, str(destination)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == BAD_INPUT and "No space left on device" in one_line(proc)
    assert snapshot(destination) == before
    assert not list(destination.rglob("*.specaudit-tmp"))
    assert specaudit("patch", str(destination), "--status", env_cache=tmp_path / "cache").returncode == 0


def test_a_sigterm_that_lands_in_a_finalizer_is_delivered_after_it_not_lost():
    # Found by the random kills (run 15 of 50): SIGTERM during GitPython's Repo.__del__ raised KeyboardInterrupt inside
    # the finalizer, where Python prints "Exception ignored in" with a traceback and drops it: the command went on.
    code = ("import os, signal, time\n"
            "from specaudit.cli import _interrupt_on_termination\n"
            "class Finalized:\n"
            "    def __del__(self):\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        time.sleep(0.2)\n"
            "try:\n"
            "    with _interrupt_on_termination():\n"
            "        Finalized()\n"
            "        time.sleep(5)\n"
            "    print('not interrupted')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.stdout == "interrupted\n" and proc.stderr == "", proc.stdout + proc.stderr


# -- inputs rendered ------------------------------------------------------------------------------------------------

HOSTILE = ["[/x]", "[link=http://evil.example]click[/link]", "\x1b]8;;http://evil.example\x1b\\here\x1b]8;;\x1b\\",
           "\x1b[2J\rwiped", "<img src=x onerror=alert(1)>"]


def test_hostile_strings_are_text_in_every_report(tmp_path):
    # A config's strings reach the terminal (rich markup: `[/x]` was a MarkupError traceback, `[link=...]` a
    # hyperlink) and the markdown report (raw HTML ran where it was rendered); escape sequences reached both raw.
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": HOSTILE, "model_type": "[/x]"}))
    out = tmp_path / "reports"
    proc = specaudit("scan", str(small_tree(tmp_path / "tree", "0.0.1")), "--model", str(model), "--format", "md",
                     "--out", str(out), env_cache=tmp_path / "cache")
    assert "Traceback" not in proc.stderr and proc.returncode in (1, 3), proc.stderr
    assert "\x1b" not in proc.stdout and "[/x]" in proc.stdout and "[link=http://evil.example]click[/link]" in proc.stdout
    (md,) = out.glob("*.md")
    text = md.read_text()
    assert "\x1b" not in text and "\r" not in text
    assert "<img" not in text.replace("`<img", "") and "&lt;img src=x onerror=alert(1)>" in text


def test_a_ten_megabyte_line_is_read_in_linear_time(tmp_path):
    # `\w+ is only supported for` backtracked quadratically on a long run of word characters (100 KB: 72 s).
    # Each line is cut to signatures.MAX_LINE_CHARS and a pattern runs only on a line holding its literal; the
    # timeout guards against a hang, it is not a measurement.
    log = tmp_path / "long.log"
    log.write_text("INFO starting\n" + "a" * 10_000_000 + " is only supported for [llama] models. Got x\n"
                   + "b" * 10_000_000 + "\n")
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "explain", str(log), "--engine", "vllm"],
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()),
                               "SPECAUDIT_CACHE": str(tmp_path / "cache")}, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr


# -- environments: containers, CI runners ----------------------------------------------------------------------------


def test_a_read_only_cache_scans_without_it_and_says_so(tmp_path):
    # `docker run --read-only`: the cache cannot be written. A mount namespace of this test's own makes it so.
    cache = tmp_path / "cache"
    cache.mkdir()
    tree = small_tree(tmp_path / "tree", "0.0.1")
    script = (f"mount --bind {cache} {cache} && mount -o remount,bind,ro {cache} && "
              f"SPECAUDIT_CACHE={cache} PYTHONPATH={ROOT} HOME={tmp_path} exec {sys.executable} -m specaudit.cli "
              f"scan {tree} --target llama3")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (unshare -m needs root)")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (1, 3) and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot be written (Read-only file system): working without it" in proc.stderr
    assert not list(cache.iterdir())


@pytest.mark.parametrize("cache", ["/dev/null", "/proc", "file"])
def test_a_cache_that_is_not_a_directory_is_one_line_and_exit_2(tmp_path, cache):
    if cache == "file":
        cache = str(tmp_path / "file")
        Path(cache).write_text("")
    proc = specaudit("scan", str(small_tree(tmp_path / "tree", "0.0.1")), "--target", "llama3", env_cache=Path(cache))
    assert proc.returncode == BAD_INPUT and "cannot hold" in one_line(proc)


@pytest.mark.parametrize("home", ["/", ""])
def test_a_home_at_the_root_or_unset_leaves_paths_as_they_are(tmp_path, home):
    # HOME=/ (common in containers) made every "/" of every report "~/": SARIF URIs became `vllm~/config~/...`.
    tree = small_tree(tmp_path / "tree", "0.0.1")
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": home, "SPECAUDIT_CACHE": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", str(tree), "--target", "llama3", "--format",
                           "sarif", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    (sarif,) = out.glob("*.sarif")
    assert "~/" not in sarif.read_text() and str(tree) in sarif.read_text()


def test_a_terminal_that_cannot_encode_the_report_gets_stand_ins_and_the_files(tmp_path):
    tree = small_tree(tmp_path / "tree", "0.0.1")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "SPECAUDIT_CACHE": str(tmp_path / "c"),
           "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", str(tree), "--target", "llama3", "--format",
                           "json", "--out", str(tmp_path / "a")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (1, 3) and "Traceback" not in proc.stderr, proc.stderr
    assert list((tmp_path / "a").glob("*.json"))
    with open("/dev/full", "w") as full:  # stdout on a full device: one line, and the files are there
        proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", str(tree), "--target", "llama3",
                               "--format", "json", "--out", str(tmp_path / "b")], env={**env, "PYTHONIOENCODING": ""},
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == BAD_INPUT and "No space left on device" in one_line(proc)
    assert list((tmp_path / "b").glob("*.json"))


# -- work bounded before it is done ----------------------------------------------------------------------------------


def test_a_huge_config_is_refused_before_it_is_read(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    with open(model / "config.json", "wb") as fh:
        fh.truncate(200_000_000)  # sparse: 200 MB that take no disk
    proc = specaudit("scan", str(small_tree(tmp_path / "tree", "0.0.1")), "--model", str(model),
                     env_cache=tmp_path / "c")
    assert proc.returncode == BAD_INPUT and "larger than any model config" in one_line(proc)


def test_a_huge_module_is_skipped_without_being_read(tmp_path):
    tree = small_tree(tmp_path / "tree", "0.0.1")
    with open(tree / "vllm" / "config.py", "wb") as fh:
        fh.truncate(2_000_000_000)  # sparse: hashing it whole took 2.1 GB of memory
    proc = specaudit("scan", str(tree), "--target", "llama3", "--format", "json", "--out", str(tmp_path / "o"),
                     env_cache=tmp_path / "c")
    assert proc.returncode in (1, 3) and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
    assert "larger than any engine module" in report["skipped"]["vllm/config.py"]


def test_a_zip_bomb_is_not_inflated(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("vllm/__init__.py", b"\n" * 100_000_000)  # 100 MB of newlines, ~100 KB compressed
        archive.writestr("vllm-0.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n\n")
    proc = specaudit("scan", str(wheel), "--target", "llama3", env_cache=tmp_path / "c")
    assert proc.returncode == BAD_INPUT and "zip bomb" in one_line(proc)


def test_the_evaluator_does_not_build_strings_without_bound():
    from specaudit.play.operators import MAX_VALUE_CHARS, bounded_replace
    from specaudit.play.values import Unknown

    value = "k"
    for _ in range(27):  # 2**27 characters, were each call made
        value = bounded_replace(value, "k", "kk") if isinstance(value, str) else value
    assert isinstance(value, Unknown) and "size bound" in value.why
    assert bounded_replace("abc", "b", "x") == "axc"
    assert isinstance(bounded_replace("k" * (MAX_VALUE_CHARS - 1), "k", "kk"), Unknown)


@pytest.mark.parametrize("steps", [16, 24])
def test_a_gate_condition_of_a_long_replace_chain_is_decided_within_a_bound(tmp_path, steps):
    # Held out: a gate whose condition is a 24-step `.replace()` chain on the target's model type did not finish, and
    # was killed after 25 s (the tracer denoted each receiver twice: 2**24 steps). Each step doubles the string: 16
    # stay under play.operators.MAX_VALUE_CHARS and are computed (the condition is false: the gate passes), 24 pass
    # it and the gate is UNKNOWN, saying why.
    import time

    tree = small_tree(tmp_path / "tree", "0.0.1")
    (tree / "vllm/config").mkdir()
    (tree / "vllm/config/__init__.py").write_text("")
    chain = "self.target_model_config.hf_text_config.model_type" + '.replace("a", "aa")' * steps
    (tree / "vllm/config/speculative.py").write_text(
        f"class SpeculativeConfig:\n    def __post_init__(self):\n"
        f"        if self.method == 'eagle3' and {chain} == 'x':\n            raise ValueError('refused')\n")
    out = tmp_path / "out"
    begun = time.monotonic()
    proc = specaudit("scan", str(tree), "--target", "llama3", "--format", "json", "--out", str(out),
                     env_cache=tmp_path / "c")
    took = time.monotonic() - begun
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr  # a toy tree has no path: UNKNOWN
    assert took < 15, f"{took:.1f} s"  # the interpreter's start and a cold index of a toy tree, on a loaded machine
    gates = [f for f in json.loads(next(out.glob("*.json")).read_text())["findings"]
             if f["file"] == "vllm/config/speculative.py"]
    if steps == 16:
        assert gates == []  # computed, and false: the gate passes, and a gate that passes is no finding
    else:
        [gate] = gates
        assert gate["status"] == "unknown" and gate["why"].endswith("cannot decide str.replace() past the size bound")


def test_a_utf16_log_is_read(tmp_path):
    # PowerShell's `>` writes UTF-16 LE with a byte-order mark: the crash was missed.
    log = tmp_path / "ps.log"
    text = ("INFO 11-30 07:22:20 starting\nTraceback (most recent call last):\n"
            '  File "/x/vllm/model_executor/models/registry.py", line 3, in _raise_for_unsupported\n'
            "ValueError: Model architectures ['Foo'] are not supported for now\n")
    log.write_bytes(text.encode("utf-16"))
    proc = specaudit("explain", str(log), "--engine", "vllm", "--format", "json", "--out", str(tmp_path / "o"),
                     env_cache=tmp_path / "c")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
    assert report["crash"]["exception"] == "ValueError" and report["lines"] == 4


def test_the_earliest_failing_process_is_the_root_cause_not_a_later_ones_known_line(tmp_path):
    # README: the root cause is the innermost exception of the earliest failing process. A known line another
    # process printed later (here the EAGLE-3 interface error) outranked it.
    log = tmp_path / "two.log"
    log.write_text(
        "(Worker_TP0 pid=11) ERROR 06-04 10:14:43 [multiproc_executor.py:522] Traceback (most recent call last):\n"
        '(Worker_TP0 pid=11) ERROR 06-04 10:14:43 [multiproc_executor.py:522]   File "/x/vllm/v1/worker/gpu_worker.py", '
        "line 9, in load_model\n"
        "(Worker_TP0 pid=11) ERROR 06-04 10:14:43 [multiproc_executor.py:522] KeyError: 'embed_tokens.weight'\n"
        "(Worker_TP1 pid=12) ERROR 06-04 10:14:50 [core.py:1] RuntimeError: Model does not support EAGLE3 interface\n")
    proc = specaudit("explain", str(log), "--engine", "vllm", "--format", "json", "--out", str(tmp_path / "o"),
                     env_cache=tmp_path / "c")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
    # Read from the traceback, or from the signature that knows its line (vllm-checkpoint-weight-name): the
    # earliest process's own exception either way.
    assert report["root"]["by"] in ("traceback", "signature") and "embed_tokens.weight" in report["root"]["summary"]


# -- a second process ------------------------------------------------------------------------------------------------


def test_status_during_an_apply_says_one_is_running_and_a_scan_says_it_read_a_tree_being_patched(tmp_path,
                                                                                                 monkeypatch):
    import fcntl

    tree = locate(str(small_tree(tmp_path / "tree", "0.0.1")))
    cache = tmp_path / "cache"

    def cache_dir(*parts: str, create: bool = True) -> Path:  # this process's Shadow where the commands' will be
        path = cache.joinpath(*parts)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    monkeypatch.setattr("specaudit.tree.provenance.cache_dir", cache_dir)
    shadow = Shadow(tree)
    with open(shadow.dir / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # an apply under way holds it
        shadow.journal.write_text("{}")  # and has its journal open
        proc = specaudit("patch", str(tree.root), "--status", env_cache=cache)
        assert proc.returncode == 6 and "another specaudit patch is running" in one_line(proc)
        proc = specaudit("scan", str(tree.root), "--target", "llama3", "--format", "json", "--out",
                         str(tmp_path / "o"), env_cache=cache)
        report = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
        assert report["provenance"]["patching"] is True and "under way" in proc.stdout


# -- kills at random times ---------------------------------------------------------------------------------------

KILL_RUNS = int(os.environ.get("SPECAUDIT_KILL_RUNS", "6"))  # validation/random_kills.sh runs 50


def test_a_kill_at_a_random_time_leaves_a_tree_the_next_command_makes_whole(tmp_path):
    # Beside test_patch.py's kill at every step boundary: SIGKILL and SIGTERM at random times of an apply or a
    # revert. After the next command the tree is wholly pristine or wholly patched, and --revert is byte-identical.
    import random
    import signal
    import time
    from collections import Counter

    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    pristine = snapshot(destination)
    took = {}  # how long each command takes here, uninterrupted: the kills are drawn over that span
    for verb, flags in (("--target", ["--target", "kimi_k2"]), ("--revert", ["--revert"])):
        begun = time.monotonic()
        assert specaudit("patch", str(destination), *flags, env_cache=cache).returncode == 0
        took[verb] = time.monotonic() - begun
        if verb == "--target":
            patched = snapshot(destination)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "SPECAUDIT_CACHE": str(cache)}
    draw = random.Random(int(os.environ.get("SPECAUDIT_KILL_SEED", "20261201")))
    tally: Counter[tuple[str, str, int, str, str]] = Counter()
    for run in range(KILL_RUNS):
        command = draw.choice([["--target", "kimi_k2"], ["--revert"]])
        if command == ["--revert"]:
            assert specaudit("patch", str(destination), "--target", "kimi_k2", env_cache=cache).returncode == 0
        proc = subprocess.Popen([sys.executable, "-m", "specaudit.cli", "patch", str(destination), *command], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(draw.uniform(0.1, 1.1) * took[command[0]])  # from its start to past its end
        sig = draw.choice([signal.SIGKILL, signal.SIGTERM])
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=600)
        assert "Traceback" not in stderr, (run, stderr)
        listing = specaudit("patch", str(destination), "--status", env_cache=cache)
        assert listing.returncode == 0 and "foreign" not in listing.stdout and "drifted" not in listing.stdout, \
            (run, sig, listing.stdout + listing.stderr)
        now = snapshot(destination)
        assert now in (pristine, patched), (run, sig)
        assert not list(destination.rglob("*.specaudit-tmp")), run
        tally[(command[0], sig.name, proc.returncode, "pristine" if now == pristine else "patched",
               "rolled back" if "recovered" in listing.stdout else "")] += 1
        assert specaudit("patch", str(destination), "--revert", env_cache=cache).returncode == 0
        assert snapshot(destination) == pristine, (run, sig)
    # validation/random_kills.sh keeps this (pytest -s): what was killed, how, and what the next command found.
    for (verb, sig_name, code, state, recovered), count in sorted(tally.items()):
        print(f"tally: {count:3d} x {verb} killed by {sig_name} (exit {code}): {state} after the next command "
              f"{recovered}".rstrip())


def test_an_engine_file_in_latin_1_is_patched_and_reverted_in_its_own_encoding(tmp_path):
    # The scan reads a PEP 263 `coding: latin-1` file; patch decoded it as UTF-8 and ended in a traceback.
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    speculative = destination / "vllm" / "config" / "speculative.py"
    speculative.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + speculative.read_bytes())
    before = speculative.read_bytes()
    cache = tmp_path / "cache"
    proc = specaudit("patch", str(destination), "--target", "kimi_k2", "--force", env_cache=cache)  # --force: RECORD
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
    patched = speculative.read_bytes()
    assert patched != before and b"# caf\xe9\n" in patched and b"kimi_k2" in patched
    compile(patched, str(speculative), "exec")
    assert specaudit("patch", str(destination), "--revert", env_cache=cache).returncode == 0
    assert speculative.read_bytes() == before


def test_a_tree_reached_through_a_bind_mount_has_the_same_patch_state(tmp_path):
    # The patch state was keyed by the path string: through a second path, a patched tree looked pristine.
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (unshare -m needs root)")
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    assert specaudit("patch", str(destination), "--target", "kimi_k2", env_cache=cache).returncode == 0
    other = tmp_path / "mnt"
    other.mkdir()
    script = (f"mount --bind {destination} {other} && SPECAUDIT_CACHE={cache} PYTHONPATH={ROOT} HOME={tmp_path} "
              f"exec {sys.executable} -m specaudit.cli patch {other} --status")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "applied: vllm-eagle3-kimi-k2" in proc.stdout, proc.stdout
    assert specaudit("patch", str(destination), "--revert", env_cache=cache).returncode == 0


def test_recovery_removes_what_a_write_killed_mid_way_left_beside_the_file(tmp_path):
    # SIGKILL between cache.write_atomic's temporary file and its rename leaves `.config.py.<random>.specaudit-tmp`.
    data = b"X = 1\n"
    shadow = planted_journal(tmp_path, {"vllm/config.py": "pristine"},
                             {"vllm/config.py": {"copy": hashlib.sha256(data).hexdigest(), "written": "0" * 64}},
                             {"vllm/config.py": data})
    stale = shadow.tree.root / "vllm" / ".config.py.k3j2h1.specaudit-tmp"
    stale.write_bytes(b"half a write")
    assert shadow.recover() == ["vllm/config.py"]
    assert not stale.exists() and (shadow.tree.root / "vllm" / "config.py").read_bytes() == data


def test_pep_440_equal_releases_share_one_cache_entry(tmp_path):
    # `vllm==0.17` and `vllm==0.17.0` are one release: one tree in the cache, not two fetches.
    from specaudit.tree.locate import _cached_release

    (tmp_path / "vllm-0.17.0").mkdir()
    (tmp_path / "vllm-0.17.0" / ".complete").write_text("w\n")
    (tmp_path / "vllm-0.99.0-cp38-abi3-manylinux_2_28_x86_64-614-1796161425").mkdir()  # a wheel's own tree
    assert _cached_release(tmp_path, "vllm", "0.17") == tmp_path / "vllm-0.17.0"
    assert _cached_release(tmp_path, "vllm", "0.17.0") == tmp_path / "vllm-0.17.0"
    assert _cached_release(tmp_path, "vllm", "0.18") == tmp_path / "vllm-0.18"


@pytest.mark.parametrize("name", ["a/..", "org/--x"])
def test_a_model_name_the_hub_refuses_is_one_line(tmp_path, name):
    # These pass the local `org/name` pattern and not huggingface_hub's validation, which raised past the refusals.
    proc = specaudit("scan", str(small_tree(tmp_path / "tree", "0.0.1")), "--model", name, env_cache=tmp_path / "c")
    assert proc.returncode == BAD_INPUT and "not a model name the Hub takes" in one_line(proc)


def test_status_says_what_it_rolled_back_from_an_interrupted_run(tmp_path):
    destination = tmp_path / "vllm-0.14.0"
    shutil.copytree(vllm_tree("0.14.0").root, destination)
    cache = tmp_path / "cache"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "SPECAUDIT_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "patch", str(destination), "--target", "kimi_k2"],
                          env={**env, "SPECAUDIT_TEST_KILL_AT_STEP": "3"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr
    listing = specaudit("patch", str(destination), "--status", env_cache=cache)
    assert listing.returncode == 0 and "recovered" in listing.stdout and "no bundle applied" in listing.stdout


# -- beyond the list: the same classes in fleet, smoke and the readers added since ----------------------------------


def test_a_hostile_node_is_one_line_on_that_node_and_nothing_is_written_outside(tmp_path):
    # Two "pods" behind the stand-in kubectl (tests/kubectl_standin.py): the first's engine METADATA names a version
    # that climbs out of the cache (the mirror of its engine was made there: smoke/preflight.py), its patch state is
    # malformed (fleet/node.py read it into a traceback) and its name is rich markup (a table title: MarkupError);
    # the second's python3 answers the probe with a banner (a JSONDecodeError traceback).
    from fleet_nodes import launch_command, write_engine, write_models

    pods_dir, states = tmp_path / "pods", {}
    for name in ("a[/x]b", "banner"):
        home, site, bin_dir = pods_dir / name / "home", pods_dir / name / "site", pods_dir / name / "bin"
        bin_dir.mkdir(parents=True)
        write_engine(site, "0.17.0")
        write_models(home)
        states[name] = {"labels": {}, "env": {"HOME": str(home), "PYTHONPATH": str(site), "PATH": f"{bin_dir}:/usr/bin:/bin",
                                              "PYTHONDONTWRITEBYTECODE": "1",
                                              "SPECAUDIT_CACHE": str(home / ".cache/specaudit")}}
    first = pods_dir / "a[/x]b"
    (first / "bin/python3").symlink_to(os.path.realpath(sys.executable))
    (first / "site/vllm-0.17.0.dist-info/METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: 0/../../../../../../..{tmp_path}/outside/x\n\n")
    package = (first / "site/vllm").stat()
    key = hashlib.sha1(f"{package.st_dev}:{package.st_ino}".encode()).hexdigest()[:12]
    state_dir = first / f"home/.cache/specaudit/patches/vllm-0.17.0-{key}"
    state_dir.mkdir(parents=True)
    (state_dir / "state.json").write_text(json.dumps({"bundles": {"b": {"files": 5}}, "files": {"x": 5}}))
    (pods_dir / "banner/bin/python3").write_text("#!/bin/sh\necho 'Welcome to the cluster!'\n")
    (pods_dir / "banner/bin/python3").chmod(0o755)
    (pods_dir / "pods.json").write_text(json.dumps({"pods": states}))
    out = tmp_path / "reports"
    proc = run_recorded(tmp_path, ["fleet", "pod/a[/x]b", "pod/banner", "--kubectl", str(ROOT / "tests/kubectl_standin.py"),
                                   "--format", "json", "--format", "md", "--out", str(out), "--", *launch_command()],
                        allowed=[out, pods_dir], env={"KUBECTL_STANDIN": str(pods_dir / "pods.json")})
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr  # the worst node's: reached, and BLOCKED
    assert "pod/a[/x]b" in proc.stdout
    nodes = {n["host"]: n for n in json.loads(next(out.glob("*.json")).read_text())["nodes"]}
    assert "is not a PEP 440 version" in nodes["pod/a[/x]b"]["scan_problem"]
    assert "not a patch state (bundle 'b'" in nodes["pod/a[/x]b"]["patch_problem"]
    assert nodes["pod/banner"]["verdict"] == "BLOCKED" and nodes["pod/banner"]["error"] == ""
    assert "the probe's answer from pod/banner: not valid JSON" in nodes["pod/banner"]["probe_problem"]
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("state, problem", [
    ({"bundles": {}, "files": {"vllm/config.py": 5}}, "file 'vllm/config.py' without its hashes"),
    ({"bundles": {"b": 5}, "files": {}}, "bundle 'b' without its lists"),
    ({"bundles": {"b": {"changes": 5, "files": []}}, "files": {}}, "bundle 'b' without its lists"),
    ({"bundles": {}, "files": {"vllm/config.py": {"pristine": "0" * 64, "applied": 7}}}, "without its hashes"),
])
def test_a_patch_state_is_checked_whole_before_it_is_read(tmp_path, state, problem):
    # Only its top level was: `"files": {"x": 5}` was a TypeError traceback in --status and --revert, and in a
    # fleet's reading of a node's state.
    from specaudit.fleet.node import bundle_states
    from specaudit.patch.bundles import revert, status

    shadow = planted_journal(tmp_path, {}, {}, {})
    shadow.journal.unlink()
    shadow.state_file.write_text(json.dumps(state))
    for command in (status, revert):
        with pytest.raises(SpecauditError, match=problem) as raised:
            command(shadow.tree)
        assert raised.value.exit_code == 2  # bad input, not drift
    assert problem in bundle_states({"dir": "d", "state": state, "current": {}})[1]


HASH = "0" * 64


@pytest.mark.parametrize("entries, fragment", [
    ({"restore": 5}, '"restore" must be a mapping of file to the copy it is restored from, not 5'),
    ({"restore": ["vllm/config.py"]}, '"restore" must be a mapping'),
    ({"restore": {"vllm/config.py": 5}}, '"restore" must be a mapping'),
    ({"restore": {"vllm/config.py": {"kind": "pristine"}}}, '"restore" must be a mapping'),
    ({"hashes": "abc"}, '"hashes" must be a mapping of file to its copy\'s and written sha256'),
    ({"hashes": {"vllm/config.py": [HASH]}}, '"hashes" must be a mapping'),
    ({"hashes": {"vllm/config.py": {"copy": 5}}}, '"hashes" must be a mapping'),
    ({"hashes": {"vllm/config.py": {"copy": HASH, "written": None}}}, '"hashes" must be a mapping'),
    ({"state": None}, '"state" must be a JSON object, not null'),
    ({"state": [1]}, '"state" must be a JSON object'),
    ({"state": {"bundles": [], "files": {}}}, "unreadable patch state (no bundles and files)"),
    ({"state": {"bundles": {}, "files": {"vllm/config.py": {"pristine": 5}}}}, "without its hashes"),
])
def test_a_journal_of_the_wrong_types_is_one_line_and_exit_2(tmp_path, monkeypatch, entries, fragment):
    # A journal whose restore field was a number exited 4 (drift): it is not a tree edited since, it is bad input.
    cache = tmp_path / "cache"

    def cache_dir(*parts: str, create: bool = True) -> Path:  # the CLI's own cache, below
        path = cache.joinpath(*parts)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    monkeypatch.setattr("specaudit.tree.provenance.cache_dir", cache_dir)
    shadow = planted_journal(tmp_path, {"vllm/config.py": "pristine"}, {"vllm/config.py": {"copy": HASH}},
                             {"vllm/config.py": b"planted\n"})
    shadow.journal.write_text(json.dumps({**json.loads(shadow.journal.read_text()), **entries}))
    with pytest.raises(SpecauditError, match=re.escape(fragment)) as raised:
        shadow.recover()
    assert not isinstance(raised.value, PatchRefused) and raised.value.exit_code == 2
    for command in (["--status"], ["--revert"]):
        proc = specaudit("patch", str(shadow.tree.root), *command, env_cache=cache)
        assert_one_line_error(proc, fragment)
    assert (shadow.tree.root / "vllm/config.py").read_text() == "X = 1\n"  # nothing restored


def test_json_nested_past_the_parsers_reach_is_one_line(tmp_path):
    # A RecursionError, which no reader of JSON caught: --speculative-config, a launch option, a prompt file.
    from specaudit.launch.command import parse_launch_command
    from specaudit.launch.request import parse_speculative_config
    from specaudit.smoke.prompts import read_prompt_file

    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(SpecauditError, match="nested too deeply"):
        parse_speculative_config('{"a": ' + deep + "}")
    assert parse_launch_command(["vllm", "serve", "M", "--max-model-len", deep]).model == "M"
    (tmp_path / "p.json").write_text(deep)
    with pytest.raises(SpecauditError, match="nested too deeply"):
        read_prompt_file(tmp_path / "p.json")


def test_log_lines_lose_every_escape_sequence_not_only_colours():
    # OSC 8 hyperlinks and OSC titles, DCS strings, 8-bit CSI and stray controls reached smoke's live view raw.
    from specaudit.explain.signatures import clean_line

    line = "a\x1b]8;;http://evil.example\x1b\\b\x1b]0;title\x07c\x1bPq\x1b\\d\x9b31me\x07f\x08\x1b(Bg\x1b[2K\tRuntimeError"
    assert clean_line(line) == "abcdefg\tRuntimeError"
    assert clean_line("loading 10%\rloading 100%\r\n") == "loading 100%"


def test_a_path_the_user_names_is_text_on_the_terminal(tmp_path):
    # "report written to {path}" was rich markup: an --out of `o[/x]` was a MarkupError after the report was written.
    out = tmp_path / "o[/x]"
    proc = run_recorded(tmp_path, ["scan", str(small_tree(tmp_path / "tree", "0.0.1")), "--target", "llama3", "--format",
                                   "json", "--out", str(out)], allowed=[tmp_path / "o["])
    assert proc.returncode in (1, 3) and "Traceback" not in proc.stderr, proc.stderr
    assert f"report written to {out}/" in proc.stdout.replace("\n", "")


def test_smokes_log_copy_never_follows_a_planted_symlink(tmp_path):
    # launcher._keep_log wrote the run's log with write_bytes: through a symlink planted at its name in --out.
    from types import SimpleNamespace

    from specaudit.smoke.launcher import Launcher, Run

    victim, out = tmp_path / "victim", tmp_path / "reports"
    victim.write_text("keep me\n")
    out.mkdir()
    (out / "smoke-gpu01-run-1.log").symlink_to(victim)
    launcher = SimpleNamespace(session=SimpleNamespace(options=SimpleNamespace(out_dir=out)), kept={},
                               _note=lambda text: None)
    path = Launcher._keep_log(launcher, Run("/runs/run-1", 1, (), host="gpu01"), b"the log\n")  # type: ignore[arg-type]
    assert path == out / "smoke-gpu01-run-1.log" and not path.is_symlink() and path.read_bytes() == b"the log\n"
    assert victim.read_text() == "keep me\n"


def test_a_long_hosts_list_is_checked_in_linear_time():
    # A node named twice was found with list.count for each node: a hosts file of 3 million lines never ended.
    from specaudit.fleet.audit import FleetOptions, audit_fleet

    with pytest.raises(SpecauditError, match="named twice: h0, h1$"):
        audit_fleet(FleetOptions(hosts=tuple(f"h{i % 200_000}" for i in range(200_002)), argv=("vllm", "serve", "M")))


def test_a_wheel_member_failing_its_crc_is_one_line(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("vllm/__init__.py", b"X = 1\n" * 10)
        archive.writestr("vllm-0.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n\n")
    data = bytearray(wheel.read_bytes())
    data[data.find(b"X = 1")] = ord("Y")  # the member's bytes, not its recorded CRC-32
    wheel.write_bytes(bytes(data))
    proc = run_recorded(tmp_path, ["scan", str(wheel), "--target", "llama3"], allowed=[])
    assert proc.returncode == BAD_INPUT and "vllm/__init__.py is damaged (Bad CRC-32" in one_line(proc)


@pytest.mark.parametrize("argv, fragment", [(["nonsense"], "not a launch command"),
                                            (["vllm", "serve", "M", "--port", "abc"], "--port abc: not a TCP port"),
                                            (["vllm", "serve", "M", "--port", "99999999"], "not a TCP port")])
def test_smokes_bad_launch_command_is_one_line_and_leaves_no_temporary_directory(tmp_path, argv, fragment):
    # The session made its ssh control directory before the command was read, and left it in $TMPDIR; a --port
    # that is not a number was a ValueError traceback.
    proc = run_recorded(tmp_path, ["smoke", "node.invalid", "--", *argv], allowed=[])
    assert proc.returncode == BAD_INPUT and fragment in one_line(proc)


def test_a_servers_figures_that_are_no_counts_are_not_read_as_acceptance():
    # smoke's acceptance (issue 27) summed meta_info values as they came: a string was a TypeError traceback, a
    # billion draft tokens per step a loop that never ended, and a NaN counter a rate no floor flags (NaN < x is False).
    import signal

    from specaudit.smoke.metrics import acceptance, load_serving, meta_acceptance

    names = load_serving("vllm")
    nan = "\n".join(f"{name}_total NaN" for name in names.counters.values())
    figures = acceptance("", nan, names, "eagle3", 3, 3)
    assert figures.acceptance_rate is None and "none of the speculative-decoding metrics" in figures.flags[0]
    assert meta_acceptance([{"spec_verify_ct": "x", "spec_num_proposed_drafts": 1}], "eagle3") is None
    signal.alarm(20)  # a guard against the hang, not a measurement
    try:
        huge = meta_acceptance([{"spec_verify_ct": 1, "spec_num_proposed_drafts": 1e9, "spec_accept_histogram": [1, 1]}],
                               "eagle3")
    finally:
        signal.alarm(0)
    assert huge is not None and huge.per_position[:2] == [0.5, 0.0]


@pytest.mark.parametrize("body", ['{"choices": [5]}', '{"choices": [{"text": "x"}], "usage": [1]}', '{"choices": "abc"}',
                                  "[" * 100_000])
def test_an_answer_of_another_shape_is_a_wrong_answer_not_a_traceback(body):
    from specaudit.smoke.exercise import check_answer

    assert not check_answer("p", 200, body, 32).ok
