"""The command line: parses arguments and calls the stages. Nothing else happens here."""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:  # a Ctrl-C while the imports run (a third of a warm scan) is an interrupt like any other
    import click
    from rich.console import Console

    from . import __version__
    from .core.engines import ENGINES
    from .core.errors import SpecauditError
    from .core.types import ExitCode
    from .launch.command import parse_launch_command
    from .launch.request import Launch, launch_of, parse_speculative_config
    from .launch.target import presets
    from .report import FORMATS, SCAN_FORMATS, check_out_dir, print_patch_status, print_report, write_report
    from .results.scan import Comparison
    from .scan.audit import scan as run_scan
    from .scan.facts import PLATFORMS
    from .smoke import RUNS_DIR  # the package alone: the ssh transport is not a scan's to load
    from .tree.locate import EngineTree, locate
except KeyboardInterrupt:
    sys.stderr.write("specaudit: interrupted\n")
    sys.exit(130)  # ExitCode.INTERRUPTED, which may not be imported yet


def _check_remote_arguments(ctx: click.Context, ssh_config: str | None, formats: tuple[str, ...], out_dir: str) -> None:
    """What smoke and fleet check before they connect anywhere: a launch command after --, the ssh config named, and
    the directory the reports go to."""
    if "launch_command" not in ctx.meta:
        raise SpecauditError("give the launch command after --")
    if ssh_config and not Path(ssh_config).expanduser().is_file():
        raise SpecauditError(f"--ssh-config {ssh_config}: no such file")
    if formats:
        check_out_dir(Path(out_dir))


def _console() -> Console:
    """Where the reports print. Engine text is printed as written, with no emoji codes (``:name:``) read into it; that
    also spares loading rich's emoji table (17 ms of a warm scan)."""
    return Console(emoji=False)


@contextmanager
def _collected_at_exit_only() -> Iterator[None]:
    """A scan's index, facts and syntax trees stay alive until the report is out, and then the process ends. The cycle
    collector would only walk them: once turned on again after the scan (scan.audit turns it off while it works), and
    in Python's last pass at exit, ~0.2 s each after a cold scan. It stays off for the command, and what the command
    built is frozen at its end (gc.freeze), out of the last pass's way."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def _reported_errors(interrupted: str) -> Iterator[None]:
    """Bad input ends as one line on stderr and its exit code; an error of the machine (a full disk, a file that
    cannot be read) as one line and exit 2; Ctrl-C, SIGTERM and SIGHUP as 130, after every cleanup on the way up
    (a patch's write rolled back, a smoke's launch torn down)."""
    try:
        with _interrupt_on_termination():
            yield
    except SpecauditError as exc:
        click.echo(f"specaudit: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"specaudit: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except KeyboardInterrupt:
        click.echo(f"specaudit: {interrupted}", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        # Every cleanup on the way up has run. The interpreter's own exit would join the process pool's manager
        # thread, which a worker stopped mid-write leaves blocked on a partial message: leave without it.
        os._exit(ExitCode.INTERRUPTED)


def _deliver(report, console: Console, formats: tuple[str, ...], out_dir: str) -> None:
    """The report's files first (a terminal that cannot take the report, a full stdout, loses none of them), then
    the report on the terminal."""
    written = [write_report(report, fmt, Path(out_dir)) for fmt in formats]
    print_report(report, console)
    for path in written:
        console.print(f"report written to {path}", markup=False)  # a path the user named: text, not markup


class _WithLaunchCommand(click.Command):
    """Everything after ``--`` is the launch command, kept apart from the scan's own arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["launch_command"] = args[cut + 1:]
            args = args[:cut]
        return super().parse_args(ctx, args)


class _OneLineUsage(click.Group):
    """A usage error (an option that does not exist, a value click refuses) is bad input like any other: one line on
    stderr and exit 2, not click's usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True,  # type: ignore[override]
             **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # no command at all: the help, as click gives it
                exc.show()
                sys.exit(exc.exit_code)
            where = exc.ctx.command_path if exc.ctx else "specaudit"
            click.echo(f"specaudit: error: {exc.format_message()} (`{where} --help` lists the options)", err=True)
            sys.exit(ExitCode.BAD_INPUT)
        except click.ClickException as exc:
            click.echo(f"specaudit: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:  # Ctrl-C while click itself reads (a prompt): an interrupt
            click.echo("specaudit: interrupted", err=True)
            sys.exit(ExitCode.INTERRUPTED)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineUsage)
@click.version_option(__version__, prog_name="specaudit")
def main() -> None:
    """Audit speculative-decoding integrations of vLLM and SGLang before launch."""
    # A terminal or pipe that cannot encode a character (PYTHONIOENCODING=ascii, a latin-1 locale) gets a stand-in.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


@main.command(cls=_WithLaunchCommand)
@click.argument("trees", nargs=-1)
@click.option("--path", "path", type=click.Path(), help="An engine tree: site-packages, a source checkout, or the package dir.")
@click.option("--engine", type=click.Choice(sorted(ENGINES)), default=None,
              help="Engine of the tree (default: detected, or the launch command's).")
@click.option("--target", "preset", help=f"A bundled target preset ({', '.join(presets())}), "
                                         "or its Hub id (moonshotai/Kimi-K2.5).")
@click.option("--model", "model_dir", help="A checkpoint directory with config.json, or a Hub id (org/name).")
@click.option("--revision", default=None, help="The Hub revision of --model (a commit, branch or tag).")
@click.option("--draft", "draft_dir", help="The drafter: a checkpoint directory, or a Hub id (its revision: the "
                                          "speculative config's `revision`).")
@click.option("--speculative-config", "spec_json", help="vLLM's --speculative-config JSON.")
@click.option("--platform", type=click.Choice(sorted(PLATFORMS)), default="cuda", show_default=True,
              help="The branch of the engine's platform dispatches to read (`if current_platform.is_rocm(): ...`).")
@click.option("--format", "formats", type=click.Choice(SCAN_FORMATS), multiple=True,
              help="Also write the report in this format (sarif: for code scanning).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
@click.pass_context
def scan(ctx: click.Context, trees: tuple[str, ...], path: str | None, engine: str | None, preset: str | None,
         model_dir: str | None, revision: str | None, draft_dir: str | None, spec_json: str | None, platform: str,
         formats: tuple[str, ...], out_dir: str) -> None:
    """Audit engine TREES (vllm==X, sglang==X, a wheel, a directory; default: the installed engine) for a
    launch. Several trees give one report with a column per engine release.

    \b
    specaudit scan vllm==0.17.0 --target kimi-k2.5
    specaudit scan vllm==0.17.0 sglang==0.5.23 --target kimi-k2.5
    specaudit scan --path /opt/venv/lib/python3.12/site-packages --model /shared/kimi-k2.5-int4
    specaudit scan -- vllm serve /shared/kimi-k2.5-int4 --speculative-config '{"method": "eagle3", ...}'
    specaudit scan vllm==0.17.0 --model meta-llama/Llama-3.1-8B-Instruct --revision main
    specaudit scan -- python3 -m sglang.launch_server --model-path /shared/kimi-k2.5-int4 --speculative-algorithm EAGLE3 ...

    Exit codes: 0 READY (or a landscape), 1 BLOCKED, 2 bad input, 3 UNKNOWN, 8 DEGRADED (it runs, and the
    drafter will not help; smoke's FLAGGED code), 130 interrupted.
    """
    console = _console()
    with _reported_errors("interrupted"), _collected_at_exit_only():
        if trees and path:
            raise SpecauditError("name the trees once: either TREES or --path")
        if formats:
            check_out_dir(Path(out_dir))
        command = parse_launch_command(ctx.meta["launch_command"]) if "launch_command" in ctx.meta else None
        # The launch command names the engine to find when no tree is named; a named tree says its own.
        located = [locate(spec, engine or (command.engine if command and spec is None else None))
                   for spec in (trees or (path,))]
        if command is not None and any(t.engine.name != command.engine for t in located):
            raise SpecauditError(f"the launch command is {command.engine}'s, the tree is "
                                 f"{', '.join(t.label for t in located if t.engine.name != command.engine)}")
        launch = launch_of(command, preset, model_dir, revision, draft_dir, spec_json)
        results = [run_scan(tree, launch, platform=platform) for tree in located]
        report = results[0] if len(results) == 1 else Comparison(results)
        _deliver(report, console, formats, out_dir)
    sys.exit(report.exit_code)


@main.command()
@click.argument("trees", nargs=-1)
@click.option("--target", "targets", multiple=True, required=True,
              help="A target as patch --target takes one: a bundled preset, its Hub id, or an architecture name "
                   "(MixtralForCausalLM) (repeatable): a column of the matrix each.")
@click.option("--engine", type=click.Choice(sorted(ENGINES)), default=None, help="The engine of --releases.")
@click.option("--releases", "release_range", default=None,
              help="Every release of --engine in this range on the package index, e.g. '>=0.10,<0.34'.")
@click.option("--pre", is_flag=True, help="With --releases: pre-releases too.")
@click.option("--platform", type=click.Choice(sorted(PLATFORMS)), default="cuda", show_default=True,
              help="The branch of the engine's platform dispatches to read.")
@click.option("--speculative-config", "spec_json", default=None,
              help="The launches' speculative config, as JSON (default: an EAGLE-3 launch), e.g. "
                   "'{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'.")
@click.option("--format", "formats", type=click.Choice(SCAN_FORMATS), multiple=True, help="Also write the matrix.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
def matrix(trees: tuple[str, ...], targets: tuple[str, ...], engine: str | None, release_range: str | None,
           pre: bool, platform: str, spec_json: str | None, formats: tuple[str, ...], out_dir: str) -> None:
    """Targets x engine TREES (vllm==X, sglang==X, a wheel, a directory): from which release each target works
    unpatched, and for each release where it is blocked, the bundle that opens it or the release to move to.

    \b
    specaudit matrix --target kimi-k2.5 vllm==0.14.0 vllm==0.17.0 vllm==0.20.0 vllm==0.33.0
    specaudit matrix --target kimi-k2.5 --target deepseek-v3 vllm==0.17.0 sglang==0.5.8 sglang==0.5.23
    specaudit matrix --target kimi-k2.5 --engine vllm --releases '>=0.10,<0.34'
    specaudit matrix --target MixtralForCausalLM --target GPT2LMHeadModel sglang==0.5.17 sglang==0.5.23
    specaudit matrix --target deepseek-v3 --target glm-4.5 --speculative-config '{"method": "mtp",
        "num_speculative_tokens": 1}' vllm==0.17.0 vllm==0.20.0 vllm==0.33.0
    """
    from .matrix import build_matrix
    from .tree.locate import locate_all

    console = _console()
    with _reported_errors("interrupted"):
        if release_range and engine is None:
            raise SpecauditError("--releases needs --engine (vllm or sglang)")
        if not trees and not release_range:
            raise SpecauditError("name the releases: TREES (vllm==0.17.0 ...) or --engine and --releases")
        if formats:
            check_out_dir(Path(out_dir))
        speculative = parse_speculative_config(spec_json) if spec_json else None
        located = locate_all(list(trees), engine, release_range, prereleases=pre)
        result = build_matrix(located, list(targets), platform=platform, speculative=speculative)
        _deliver(result, console, formats, out_dir)
    sys.exit(result.exit_code)


@main.command()
@click.argument("tree", required=False)
@click.option("--target", help="The bundle target: kimi_k2 (Kimi-K2 and Kimi-K2.5), deepseek_v3; any other target (a preset, "
              "an architecture name) gets a bundle synthesized from the release's supported classes of its shape.")
@click.option("--model", "model", help="A checkpoint directory or Hub id whose architecture gets a synthesized bundle.")
@click.option("--revision", help="The Hub revision of --model.")
@click.option("--bundle", "bundle_dir", type=click.Path(file_okay=False), help="Apply a bundle directory (a synthesized one).")
@click.option("--bundle-out", type=click.Path(file_okay=False), default="bundles", show_default=True,
              help="Where a synthesized bundle is written, for review.")
@click.option("--path", "path", type=click.Path(), help="The engine tree (default: the installed engine).")
@click.option("--engine", type=click.Choice(sorted(ENGINES)), default=None)
@click.option("--dry-run", is_flag=True, help="Print the unified diff it would apply; change nothing.")
@click.option("--status", "show_status", is_flag=True, help="Bundles applied, files changed, drift since.")
@click.option("--revert", "do_revert", is_flag=True, help="Restore every patched file byte for byte.")
@click.option("--force", is_flag=True, help="Patch or revert files that drifted from what specaudit expects.")
@click.option("--format", "formats", type=click.Choice(SCAN_FORMATS), multiple=True, help="Also write the rescan's report.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
def patch(tree: str | None, target: str | None, model: str | None, revision: str | None, bundle_dir: str | None,
          bundle_out: str, path: str | None, engine: str | None, dry_run: bool, show_status: bool, do_revert: bool,
          force: bool, formats: tuple[str, ...], out_dir: str) -> None:
    """Apply (or --revert, --status) the versioned patch bundle that opens the EAGLE-3 gates for a target.

    \b
    specaudit patch --target kimi_k2 --dry-run
    specaudit patch --target GPT2LMHeadModel --dry-run     # synthesized: written to bundles/, diff shown
    specaudit patch --model /shared/gemma-3-1b-it           # synthesized for the checkpoint's architecture
    specaudit patch --bundle bundles/vllm-eagle3-synth-gpt2lmheadmodel-0.26.0
    specaudit patch --status
    specaudit patch --revert
    """
    # Imported here: the codemods bring libcst, which a scan with a warm cache never needs.
    from .patch.bundles import apply as apply_patch
    from .patch.bundles import load_bundle, load_bundles, select_bundle
    from .patch.bundles import revert as revert_patch
    from .patch.bundles import status as patch_status

    console = _console()
    with _reported_errors("interrupted; a write in progress was rolled back"):
        if tree and path:
            raise SpecauditError("name the tree once: either TREE or --path")
        if formats:
            check_out_dir(Path(out_dir))
        if sum((show_status, do_revert, bool(target), bool(model), bool(bundle_dir))) != 1:
            raise SpecauditError("give one of --target NAME, --model DIR, --bundle DIR, --status, --revert")
        located = locate(tree or path, engine)
        if show_status:
            print_patch_status(located, *patch_status(located), console)
            return
        if do_revert:
            console.print(revert_patch(located, force=force).message, markup=False)
            return
        shipped = load_bundles(located.engine.name)
        if bundle_dir:
            bundle = load_bundle(Path(bundle_dir))
        elif target and any(b.target == target.replace("-", "_") for b in shipped):
            bundle = select_bundle(shipped, target, located.version)
        else:
            bundle = load_bundle(_synthesized(located, target, model, revision, Path(bundle_out), console))
        outcome = apply_patch(located, bundle, dry_run=dry_run, force=force)
        if dry_run:
            click.echo(outcome.diff, nl=False)
        console.print(outcome.message, markup=False)
        if not dry_run:
            targets = bundle.targets()
            results = [run_scan(located, Launch(t, method=bundle.method)) for t in targets.values()]
            for name, result in zip(targets, results):
                console.print(f"rescan for {name}: [bold]{result.verdict}[/]"
                              + "".join(f"\n  still blocked: {f.title} ({f.location})" for f in result.blocking))
            for fmt in formats:
                for result in results:
                    console.print(f"report written to {write_report(result, fmt, Path(out_dir))}", markup=False)


def _synthesized(located: EngineTree, target: str | None, model: str | None, revision: str | None, out: Path,
                 console: Console) -> Path:
    """Synthesize the bundle of a target no shipped bundle names (a preset, an architecture, a checkpoint)."""
    from .launch.target import load_model
    from .patch.synthesize import synthesize, target_named
    from .scan.audit import analyze

    wanted = load_model(model, revision) if model else target_named(str(target))
    made = synthesize(analyze(located), wanted, out)
    console.print(f"synthesized {made.bundle_id} from {made.donor}: {made.directory} (review it, commit it)", markup=False)
    return made.directory


@main.command(cls=_WithLaunchCommand)
@click.argument("hosts", nargs=-1)
@click.option("--hosts-file", type=click.Path(dir_okay=False), help="More nodes, one a line (# comments).")
@click.option("--engine", type=click.Choice(sorted(ENGINES)), default=None,
              help="The engine the launch command must be (default: read from the command).")
@click.option("--ssh-config", type=click.Path(dir_okay=False), help="An ssh config file instead of ~/.ssh/config.")
@click.option("--launch-anyway", is_flag=True, help="Launch even when the preflight scan says BLOCKED.")
@click.option("--check-lossless", is_flag=True, help="Relaunch without the drafter: greedy tokens must be identical.")
@click.option("--prompt", "prompts", multiple=True, help="A prompt to send once ready (repeatable).")
@click.option("--prompts", "prompt_set", metavar="KIND|FILE",
              help="Bundled prompts of a kind, acceptance reported per kind: chat, code, maths, all (or kinds joined "
                   "by commas); or a file (YAML/JSON: kind -> prompts; text: one prompt a line).")
@click.option("--max-tokens", type=click.IntRange(1), default=32, show_default=True)
@click.option("--ready-timeout", type=click.FloatRange(1), default=1800, show_default=True,
              help="Seconds to wait for the server to be ready.")
@click.option("--lease", type=click.IntRange(5), default=120, show_default=True,
              help="Seconds without word from specaudit before the remote watchdog stops the launch.")
@click.option("--reconnect-within", type=click.FloatRange(0), default=60, show_default=True,
              help="Seconds to keep trying after the connection drops.")
@click.option("--runs-dir", default=RUNS_DIR, show_default=True, help="Where launches keep their logs on the remote.")
@click.option("--format", "formats", type=click.Choice(FORMATS), multiple=True, help="Also write the report.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
@click.pass_context
def smoke(ctx: click.Context, hosts: tuple[str, ...], hosts_file: str | None, engine: str | None, ssh_config: str | None,
          launch_anyway: bool, check_lossless: bool, prompts: tuple[str, ...], prompt_set: str | None, max_tokens: int,
          ready_timeout: float, lease: int, reconnect_within: float, runs_dir: str, formats: tuple[str, ...],
          out_dir: str) -> None:
    """Launch on HOST (as ssh names it) the command after --, audited first, watched live, exercised, stopped. Several
    hosts (the head first): a multi-node launch through the engine's own launcher, each node's part of the command
    (its --node-rank, vLLM's workers --headless; Ray's ray start), every node audited first as fleet audits them.

    \b
    specaudit smoke gpu-node -- python3 -m vllm.entrypoints.openai.api_server --model /shared/kimi-k2.5-int4 \\
        --tensor-parallel-size 8 --speculative-config '{"method":"eagle3","model":"/data/eagle3","num_speculative_tokens":5}'
    specaudit smoke ops@gpu07 --engine sglang -- python3 -m sglang.launch_server ...
    specaudit smoke gpu01 gpu02 -- vllm serve /shared/kimi-k2.5-int4 -tp 16 --nnodes 2 --master-addr 10.0.0.1 ...

    Exit codes: 0 passed, 1 failed or blocked, 7 ssh, 8 FLAGGED (runs, but acceptance or losslessness is
    wrong; the code of scan's DEGRADED), 130 interrupted.
    """
    from dataclasses import replace

    from .smoke.live import LiveView  # here: the smoke stage and its live view are not a scan's to load
    from .smoke.prompts import Prompt, load_prompts
    from .smoke.run import SmokeOptions, run_smoke

    console = _console()
    with _reported_errors("interrupted"):
        _check_remote_arguments(ctx, ssh_config, formats, out_dir)
        argv = tuple(ctx.meta["launch_command"])
        if engine and parse_launch_command(list(argv)).engine != engine:
            raise SpecauditError(f"the launch command is not {engine}'s")
        if hosts_file:
            from .fleet.hosts import node_names  # here: a launch on one node never loads the fleet stage

            hosts = node_names(hosts, hosts_file)
        nodes = hosts
        if not nodes:
            raise SpecauditError("name the node: HOST (several for a multi-node launch, the head first)")
        twice = sorted(h for h, count in Counter(nodes).items() if count > 1)  # linear: a hosts file may be long
        if twice:
            raise SpecauditError(f"a node is named twice: {', '.join(twice)}")
        options = SmokeOptions(host=nodes[0], workers=nodes[1:], argv=argv, ssh_config=ssh_config, runs_dir=runs_dir,
                               launch_anyway=launch_anyway, check_lossless=check_lossless, ready_timeout=ready_timeout,
                               lease=lease, reconnect_within=reconnect_within, max_tokens=max_tokens, out_dir=Path(out_dir))
        if prompts or prompt_set:
            options = replace(options, prompts=(load_prompts(prompt_set) if prompt_set else ())
                              + tuple(Prompt(p) for p in prompts))
        launch = run_smoke
        if options.workers:
            from .fleet.smoke import run_fleet_smoke

            launch = run_fleet_smoke
        with LiveView(console, ", ".join(nodes)) as view:
            result = launch(options, view)
        _deliver(result, console, formats, out_dir)
    sys.exit(result.exit_code)


@main.command(cls=_WithLaunchCommand)
@click.argument("hosts", nargs=-1)
@click.option("--hosts-file", type=click.Path(dir_okay=False), help="A file of hosts, one a line (# comments).")
@click.option("--ssh-config", type=click.Path(dir_okay=False), help="An ssh config file instead of ~/.ssh/config.")
@click.option("--selector", help="Kubernetes pods by label selector (app=vllm), reached with kubectl exec; "
                                 "a single pod is a host named pod/NAME.")
@click.option("--namespace", help="The pods' Kubernetes namespace (default: kubectl's).")
@click.option("--context", "kube_context", help="The kubectl context (default: kubectl's).")
@click.option("--container", help="The container of each pod to run in (default: the pod's default).")
@click.option("--kubectl", "kubectl", default="kubectl", show_default=True, help="The kubectl to call.")
@click.option("--runs-dir", default=RUNS_DIR, show_default=True,
              help="Where smoke launches keep their runs on the nodes (leftovers are looked for there).")
@click.option("--parallel", type=click.IntRange(min=1), default=None,
              help="Nodes probed at once (default: 8 per core of this machine).")
@click.option("--format", "formats", type=click.Choice(SCAN_FORMATS), multiple=True,
              help="Also write the report (sarif: the nodes' scans).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
@click.pass_context
def fleet(ctx: click.Context, hosts: tuple[str, ...], hosts_file: str | None, ssh_config: str | None,
          selector: str | None, namespace: str | None, kube_context: str | None, container: str | None, kubectl: str,
          runs_dir: str, parallel: int | None, formats: tuple[str, ...], out_dir: str) -> None:
    """Audit every node of a multi-node launch, in parallel, each over its own connection: engine release and
    files, patch bundles, checkpoints, GPUs and the static scan of its own engine; where the nodes differ; and
    whether the launch's parallel sizes add up on them. The first node is the head.

    \b
    specaudit fleet gpu01 gpu02 -- vllm serve /shared/kimi-k2.5-int4 -tp 8 -pp 2 --nnodes 2 --master-addr 10.0.0.1 \\
        --speculative-config '{"method":"eagle3","model":"/data/eagle3","num_speculative_tokens":3}'
    specaudit fleet --hosts-file nodes.txt -- python3 -m sglang.launch_server --model-path ... --tp 16 --nnodes 2
    specaudit fleet --selector app=vllm --namespace inference -- vllm serve ...

    Exit codes: the worst node's, as scan's (7 not reached, 1 BLOCKED, 8 DEGRADED, 3 UNKNOWN, 0 READY); 1 too when
    the nodes differ in what the launch needs alike, or its parallel sizes do not add up on them.
    """
    from .fleet.audit import FleetOptions, audit_fleet, default_parallel  # here: a scan never loads the fleet stage
    from .fleet.hosts import node_names
    from .fleet.kubectl import Cluster

    console = _console()
    with _reported_errors("interrupted"):
        _check_remote_arguments(ctx, ssh_config, formats, out_dir)
        cluster = Cluster(kubectl=kubectl, context=kube_context, namespace=namespace, container=container)
        options = FleetOptions(hosts=node_names(hosts, hosts_file, selector, cluster),
                               argv=tuple(ctx.meta["launch_command"]), ssh_config=ssh_config, cluster=cluster,
                               runs_dir=runs_dir, workers=parallel or default_parallel())
        with console.status(f"auditing {len(options.hosts)} node(s)"):
            result = audit_fleet(options)
        _deliver(result, console, formats, out_dir)
    sys.exit(result.exit_code)


@contextmanager
def _interrupt_on_termination() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) stop a command as Ctrl-C does. One that arrives while a finalizer
    runs (``__del__``: GitPython's Repo stops its helper processes there) is delivered again 50 ms later: raised
    inside a finalizer, it would be printed as "Exception ignored" and lost, and the command would go on."""
    def interrupt(signum, frame):
        while frame is not None:
            if frame.f_code.co_name == "__del__":
                signal.setitimer(signal.ITIMER_REAL, 0.05)  # SIGALRM: this handler again, once the finalizer is done
                return
            frame = frame.f_back
        raise KeyboardInterrupt

    saved = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@main.command()
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(sorted(ENGINES)), default=None, help="Only this engine's signatures.")
@click.option("--tree", default=None, help="The engine tree that wrote the log (vllm==X, a wheel, a directory); "
                                           "default: the release the log names, fetched like scan's.")
@click.option("--platform", type=click.Choice(sorted(PLATFORMS)), default=None,
              help="The platform branch to read in that tree (default: the one the log names, else cuda).")
@click.option("--format", "formats", type=click.Choice(FORMATS), multiple=True, help="Also write the explanation.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports", show_default=True)
def explain(log: str, engine: str | None, tree: str | None, platform: str | None, formats: tuple[str, ...],
            out_dir: str) -> None:
    """Classify a launch LOG made without specaudit: the root cause, the gate it is and what opens it.

    The root cause is the first traceback that is not a wrapper, classified by where the engine raised it
    against a scan of the release (a frame inside a gate's statement is that gate), else by its text.
    Exit code 1 when the log shows a failed launch or a crash after it came up, 0 when it shows neither.
    """
    from .explain.diagnose import explain as explain_log

    console = _console()
    with _reported_errors("interrupted"):
        if formats:
            check_out_dir(Path(out_dir))
        explanation = explain_log(log, [engine] if engine else None, tree, platform)
        _deliver(explanation, console, formats, out_dir)
    sys.exit(explanation.exit_code)


@main.command()
@click.argument("trees", nargs=-1)
@click.option("--rebuild", is_flag=True, help="Build each release's part again, even where it is cached.")
def atlas(trees: tuple[str, ...], rebuild: bool) -> None:
    """Build or refresh the message atlas that explain locates pasted lines in, from engine TREES (vllm==X,
    sglang==X, a wheel, a directory; default: every release in the tree cache). explain builds what is missing
    on first use; this builds it now, for releases not fetched yet too.
    """
    from .explain.atlas_build import cached_release_trees, refresh

    with _reported_errors("interrupted"):
        engine_trees = [locate(spec) for spec in trees] if trees else cached_release_trees()
        built, merged = refresh(engine_trees, rebuild)
    for release in built:
        how = "built" if release.built else "cached"
        click.echo(f"{release.label}: {release.templates} templates, {release.bytes / 1e6:.2f} MB, {how} in "
                   f"{release.seconds:.1f} s")
    click.echo(f"atlas: {len(merged)} templates over {sum(len(r) for r in merged.releases.values())} release(s)")


if __name__ == "__main__":
    main()
