#!/usr/bin/env python3
"""A stand-in for ``kubectl``, for the fleet tests: the few commands specaudit's adapter gives it, answered as kubectl
answers them, for "pods" that are folders on this machine (no cluster can run here).

The pods are in the JSON file $KUBECTL_STANDIN: {"pods": {NAME: {"labels": {...}, "env": {...}}}}.
  kubectl [--context C] [--namespace N] get pods --selector K=V ... --output jsonpath=...  the running pods' names
  kubectl [...] exec [-i] POD [--container C] -- CMD ARGS...  CMD run with the pod's environment, its exit status
Every call is appended to $KUBECTL_STANDIN.log, one JSON list a line.
"""

import json
import os
import subprocess
import sys


def main(argv):
    state_file = os.environ["KUBECTL_STANDIN"]
    with open(state_file + ".log", "a") as log:
        log.write(json.dumps(argv) + "\n")
    with open(state_file) as fh:
        pods = json.load(fh)["pods"]
    args = list(argv)
    while args and args[0] in ("--context", "--namespace"):
        args = args[2:]
    if args[:2] == ["get", "pods"]:
        selector = args[args.index("--selector") + 1]
        key, _, value = selector.partition("=")
        for name, pod in pods.items():
            if pod.get("labels", {}).get(key) == value:
                print(name)
        return 0
    if args[:1] == ["exec"]:
        cut = args.index("--")
        words = [w for w in args[1:cut] if w != "-i"]
        if "--container" in words:
            i = words.index("--container")
            del words[i:i + 2]
        name = words[0]
        if name not in pods:
            sys.stderr.write(f'Error from server (NotFound): pods "{name}" not found\n')
            return 1
        env = {**os.environ, **pods[name]["env"]}
        proc = subprocess.run(args[cut + 1:], env=env, cwd=env.get("HOME"))
        if proc.returncode:
            sys.stderr.write(f"command terminated with exit code {proc.returncode}\n")
        return proc.returncode
    sys.stderr.write(f"error: the stand-in does not know: {' '.join(argv)}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
