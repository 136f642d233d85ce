"""A fleet audit of 8 loopback nodes beside 8 one-node audits of the same nodes, one after another, in one run.

Each node is a real sshd on 127.0.0.1 (tests/fleet_nodes.py) with its own HOME, PATH and PYTHONPATH, whose engine is a
hard-linked copy of a real vLLM release from specaudit's cache (``--release``, default 0.17.0: 1,466 .py files), with
a tiny EAGLE-3 drafter and target under ~/models. The one-node audits are ``audit_fleet`` on one host each: what a
user without the fleet command would run per node (probe, copy of the engine's files, scan). Both start from the same
state: a cold specaudit cache (``--warm`` runs each once first, and measures the second runs).

    python bench/fleet_bench.py [--nodes 8] [--release 0.17.0] [--warm]
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
from specaudit.tree.locate import locate  # noqa: E402


def timed(options: FleetOptions) -> tuple[float, object]:
    begun = time.perf_counter()
    result = audit_fleet(options)
    return time.perf_counter() - begun, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--release", default="0.17.0")
    parser.add_argument("--warm", action="store_true", help="measure second runs (the engine copies and indexes cached)")
    args = parser.parse_args()
    tree = locate(f"vllm=={args.release}").root  # from the cache (fetched once)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        base = Path(tmp)
        nodes = []
        try:
            for i in range(args.nodes):
                node = start_node(base / f"n{i}", f"node{i}", gpus=8)
                link_engine(node.site, tree)
                write_models(node.home)
                nodes.append(node)
            config = str(ssh_config(nodes, base / "ssh_config"))
            argv = tuple(launch_command("-tp", "8", "--nnodes", str(args.nodes), "--master-addr", "10.0.0.1"))
            names = tuple(n.name for n in nodes)

            def cache(label: str) -> None:
                os.environ["SPECAUDIT_CACHE"] = str(base / f"cache-{label}")

            cache("fleet")
            if args.warm:
                audit_fleet(FleetOptions(hosts=names, argv=argv, ssh_config=config))
            fleet_s, fleet = timed(FleetOptions(hosts=names, argv=argv, ssh_config=config))
            cache("single")
            singles = []
            for name in names:
                if args.warm:
                    audit_fleet(FleetOptions(hosts=(name,), argv=argv, ssh_config=config))
                singles.append(timed(FleetOptions(hosts=(name,), argv=argv, ssh_config=config))[0])
        finally:
            for node in nodes:
                node.sshd.stop()
    state = "warm" if args.warm else "cold"
    print(f"vLLM {args.release} on {args.nodes} loopback nodes, {os.cpu_count()} cores, {state} cache")
    print(f"fleet audit of {args.nodes} nodes:      {fleet_s:6.2f} s wall  ({fleet.scans} scan(s), "  # type: ignore[attr-defined]
          f"verdict {fleet.verdict}, worst node {fleet.worst_node})")  # type: ignore[attr-defined]
    probes = [n.seconds for n in fleet.nodes if n.scanned_on]  # type: ignore[attr-defined]
    scanned = [n for n in fleet.nodes if not n.scanned_on and n.scan]  # type: ignore[attr-defined]
    print(f"  of which: the slowest node's probe {max(probes, default=0):.2f} s; the scan (copy and audit) on "
          f"{scanned[0].host if scanned else '-'} {scanned[0].seconds if scanned else 0:.2f} s")
    print(f"sum of {args.nodes} one-node audits:  {sum(singles):6.2f} s       "
          f"(each {min(singles):.2f} to {max(singles):.2f} s)")
    print(f"ratio: {sum(singles) / fleet_s:.1f}x")


if __name__ == "__main__":
    main()
