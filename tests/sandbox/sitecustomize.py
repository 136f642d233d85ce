"""Loaded by the interpreter of a command under test (tests/test_hostile.py puts this directory first on its
PYTHONPATH): every path the process writes, creates, renames, removes or changes the mode of is appended to the
file $SPECAUDIT_WRITE_LOG, one per line, through Python's audit hooks. The test then holds them against the
directories the command was meant to write.

A path relative to a directory descriptor (``shutil.rmtree`` removes by ``dir_fd``) is resolved through that
descriptor, not the working directory. What a child that is not Python writes (git, ssh) is not seen here: the test
also compares the sandbox before and after (test_hostile.run_recorded)."""

import os
import sys

_LOG = os.environ.get("SPECAUDIT_WRITE_LOG")
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# event -> (index of a path written, index of the directory descriptor it is relative to, or None)
_EVENTS = {"os.rename": ((0, 2), (1, 3)), "os.replace": ((0, 2), (1, 3)), "os.remove": ((0, 1),),
           "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.symlink": ((1, 2),), "os.link": ((1, 3),),
           "os.chmod": ((0, 2),), "os.truncate": ((0, None),), "shutil.rmtree": ((0, 1),)}


def _resolved(path, dir_fd):
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):  # -1: no descriptor
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        except OSError:
            pass
    return os.path.abspath(path)


def _paths(event, args):
    if event == "open" and len(args) >= 3 and isinstance(args[0], (str, bytes, os.PathLike)):
        mode, flags = args[1] or "", args[2] or 0
        if any(c in str(mode) for c in "wax+") or flags & _WRITES:
            return [_resolved(args[0], None)]
        return []
    return [_resolved(args[i], args[fd] if fd is not None and fd < len(args) else None)
            for i, fd in _EVENTS.get(event, ()) if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike))]


def _hook(event, args):
    if _LOG is None or (event != "open" and event not in _EVENTS):
        return
    paths = [p for p in _paths(event, args) if p != _LOG]  # not the log's own writes
    if not paths:
        return
    with open(_LOG, "a", encoding="utf-8", opener=lambda p, f: os.open(p, f)) as log:
        for path in paths:
            log.write(path + "\n")


if _LOG:
    sys.addaudithook(_hook)
