"""Loaded by the interpreter of a command under test (tests/test_hostile.py puts this directory first on its
PYTHONPATH): every path the process writes, creates, renames, removes or changes the mode of is appended to the
file $SPECAUDIT_WRITE_LOG, one per line, through Python's audit hooks. The test then holds them against the
directories the command was meant to write."""

import os
import sys

_LOG = os.environ.get("SPECAUDIT_WRITE_LOG")
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = {"os.rename": (0, 1), "os.replace": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,),
           "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.truncate": (0,), "shutil.rmtree": (0,)}


def _paths(event, args):
    if event == "open" and len(args) >= 3 and isinstance(args[0], (str, bytes, os.PathLike)):
        mode, flags = args[1] or "", args[2] or 0
        if any(c in str(mode) for c in "wax+") or flags & _WRITES:
            return [args[0]]
        return []
    return [args[i] for i in _EVENTS.get(event, ()) if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike))]


def _hook(event, args):
    paths = [p for p in _paths(event, args) if os.fsdecode(p) != _LOG]  # not the log's own writes
    if not paths or _LOG is None:
        return
    with open(_LOG, "a", encoding="utf-8", opener=lambda p, f: os.open(p, f)) as log:
        for path in paths:
            log.write(os.path.abspath(os.fsdecode(path)) + "\n")


if _LOG:
    sys.addaudithook(_hook)
