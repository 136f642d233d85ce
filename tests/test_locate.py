"""Locating a tree: installed (found, never imported), a wheel, a directory, a release from the index."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from specaudit.core.errors import SpecauditError
from specaudit.tree.locate import locate

ROOT = Path(__file__).resolve().parents[1]
TRAP = "raise RuntimeError('the engine must never be imported')\n"


def test_installed_engine_is_found_without_importing_it(make_tree, tmp_path):
    site = make_tree({"vllm/__init__.py": TRAP, "vllm/model_executor/models/registry.py": "X = {}\n"},
                     version="0.14.0")
    code = ("import sys; from specaudit.tree.locate import locate; t = locate(None); "
            "print(t.version, t.root, 'vllm' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{ROOT}:{site}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    version, root, imported = proc.stdout.split()
    assert (version, Path(root), imported) == ("0.14.0", site, "False")


def test_a_wheel_is_extracted_py_files_and_metadata_only(tmp_path):
    wheel = tmp_path / "vllm-0.99.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("vllm/__init__.py", TRAP)
        zf.writestr("vllm/_C.abi3.so", b"\x7fELF")
        zf.writestr("vllm-0.99.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n\n")
        zf.writestr("vllm-0.99.0.dist-info/RECORD", "")
    tree = locate(str(wheel))
    assert tree.version == "0.99.0" and tree.label == "vllm 0.99.0"
    assert (tree.package_dir / "__init__.py").read_text() == TRAP
    assert not (tree.package_dir / "_C.abi3.so").exists()


def test_directory_forms(make_tree):
    root = make_tree({"vllm/__init__.py": ""}, version="0.17.0")
    assert locate(str(root)).root == root  # site-packages
    assert locate(str(root / "vllm")).root == root  # the package directory itself


def test_a_bad_wheel_is_one_clear_error(tmp_path):
    wheel = tmp_path / "vllm-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    with pytest.raises(SpecauditError, match="not a valid wheel"):
        locate(str(wheel))


def test_no_network_is_one_clear_error(tmp_path):
    # A package index on a closed loopback port: pip cannot connect, as without a network.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "SPECAUDIT_CACHE": str(tmp_path / "cache"), "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_CONFIG_FILE": "/dev/null"}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "vllm==0.17.0", "--target", "llama3"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "specaudit: error: vllm==0.17.0: the package index lists no release of vllm (no network, or no such package?)"]
