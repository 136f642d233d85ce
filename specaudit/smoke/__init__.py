"""specaudit smoke: a live launch of the engine on a GPU node over SSH (run.py), and what it reads there."""

RUNS_DIR = "~/.cache/specaudit/runs"  # where launches keep their logs, on the remote
