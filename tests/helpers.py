"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def specaudit(*args: str, cwd: Path | None = None, env_cache: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, with a bare environment: what a user's shell gives it."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())}
    if env_cache:
        env["SPECAUDIT_CACHE"] = str(env_cache)
    return subprocess.run([sys.executable, "-m", "specaudit.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=600)


def assert_one_line_error(proc, fragment):
    """Bad input: exit code 2 and one line on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specaudit: error:"), proc.stderr
    assert fragment in lines[0]
