"""Fleet audits of loopback nodes, 8 and 64 of them, cold and warm, beside 8 one-node audits one after another, in one
run.

Each node is a real sshd on 127.0.0.1 (tests/fleet_nodes.py) with its own HOME, PATH and PYTHONPATH, whose engine is a
hard-linked copy of a real vLLM release from specaudit's cache (``--release``, default 0.17.0: 1,466 .py files), with
a tiny EAGLE-3 drafter and target under ~/models. Cold: a fresh specaudit cache (nothing mirrored, nothing indexed);
warm: the same audit again. The one-node audits are ``audit_fleet`` on one host each, cold then warm: what a user
without the fleet command would run per node (probe, copy of the engine's files, scan), over the first ``--nodes``.

    python bench/fleet_bench.py [--nodes 8 64] [--release 0.17.0] [--singles 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fleet_nodes import launch_command, link_engine, ssh_config, start_node, write_models  # noqa: E402

from specaudit.fleet.audit import FleetOptions, audit_fleet  # noqa: E402
from specaudit.fleet.results import FleetResult  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402


def timed(options: FleetOptions) -> tuple[float, FleetResult]:
    begun = time.perf_counter()
    result = audit_fleet(options)
    return time.perf_counter() - begun, result


def line(label: str, seconds: float, fleet: FleetResult) -> str:
    probes = [n.seconds for n in fleet.nodes if n.scanned_on]
    scanned = [n for n in fleet.nodes if not n.scanned_on and n.scan]
    return (f"{label}: {seconds:6.2f} s wall ({fleet.scans} scan(s), verdict {fleet.verdict}, worst node "
            f"{fleet.worst_node}; the slowest other node's probe {max(probes, default=0):.2f} s, the scan (copy and "
            f"audit) on {scanned[0].host if scanned else '-'} {scanned[0].seconds if scanned else 0:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--release", default="0.17.0")
    parser.add_argument("--singles", type=int, default=8, help="one-node audits of that many nodes (0: none)")
    args = parser.parse_args()
    tree = locate(f"vllm=={args.release}").root  # from the cache (fetched once)
    print(f"vLLM {args.release} on loopback nodes, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        base = Path(tmp)
        nodes = []
        try:
            for i in range(max(args.nodes)):
                node = start_node(base / f"n{i}", f"node{i}", gpus=8)
                link_engine(node.site, tree)
                write_models(node.home)
                nodes.append(node)
            config = str(ssh_config(nodes, base / "ssh_config"))
            for count in args.nodes:
                os.environ["SPECAUDIT_CACHE"] = str(base / f"cache-fleet-{count}")
                argv = tuple(launch_command("-tp", "8", "--nnodes", str(count), "--master-addr", "10.0.0.1"))
                options = FleetOptions(hosts=tuple(n.name for n in nodes[:count]), argv=argv, ssh_config=config)
                for state in ("cold", "warm"):
                    print(line(f"fleet audit of {count} nodes, {state}", *timed(options)), flush=True)
            if args.singles:
                os.environ["SPECAUDIT_CACHE"] = str(base / "cache-single")
                argv = tuple(launch_command("-tp", "8"))
                for state in ("cold", "warm"):
                    singles = [timed(FleetOptions(hosts=(n.name,), argv=argv, ssh_config=config))[0]
                               for n in nodes[:args.singles]]
                    # Cold: the first audit copies and indexes the release; the others find it (one cache, one user).
                    print(f"sum of {args.singles} one-node audits, {state}: {sum(singles):6.2f} s (each {min(singles):.2f} "
                          f"to {max(singles):.2f} s)", flush=True)
        finally:
            for node in nodes:
                node.sshd.stop()


if __name__ == "__main__":
    main()
