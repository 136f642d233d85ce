"""The smoke's exercise. Real requests through the forwarded port once the server is ready, each answer
checked (a 200 alone proves little), the acceptance of exactly these requests from /metrics, and the greedy
answers with and without the drafter compared token by token.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace

from ..results.outcome import Acceptance, Answer, Lossless
from .metrics import ServingProfile, acceptance, expected, meta_acceptance
from .prompts import by_kind
from .session import Session
from .watch import Watch

# Both engines' OpenAI servers take these extras: greedy, exactly max_tokens tokens, and the token ids back
# (vllm/entrypoints/openai/completion/protocol.py; sglang/srt/entrypoints/openai/protocol.py).
COMPLETION = {"temperature": 0, "ignore_eos": True, "return_token_ids": True}


class Server:
    """The engine's OpenAI server, on a loopback port forwarded to the node."""

    def __init__(self, port: int, serving: ServingProfile):
        self.port, self.serving = port, serving

    def ready(self) -> bool:
        """/health answers 200 and the server lists a model."""
        return self._http(self.serving.health, None, timeout=1)[0] == 200 and bool(self.model())

    def model(self) -> str | None:
        status, body = self._http("/v1/models", None, timeout=5)
        try:
            return json.loads(body)["data"][0]["id"] if status == 200 else None
        except (ValueError, KeyError, IndexError, TypeError):
            return None

    def metrics(self) -> str:
        return self._http("/metrics", None, timeout=10)[1]

    def complete(self, body: dict) -> tuple[int, str]:
        return self._http("/v1/completions", body, timeout=600)

    def generate(self, prompt: str, max_tokens: int) -> dict | None:
        """SGLang's native /generate, greedy: its meta_info (the request's own speculative figures), or None."""
        status, text = self._http("/generate", {"text": prompt, "sampling_params": {
            "max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": True}}, timeout=600)
        try:
            meta = json.loads(text).get("meta_info") if status == 200 else None
        except (ValueError, AttributeError):
            return None
        return meta if isinstance(meta, dict) else None

    def _http(self, path: str, body: dict | None, timeout: float) -> tuple[int, str]:
        """Status and body; status 0 when nothing answered (not listening yet, or the connection broke)."""
        import urllib.error  # here: urllib.request loads ssl and certifi, which a scan does not need
        import urllib.request

        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                         data=json.dumps(body).encode() if body is not None else None, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return 0, str(exc)


class Exercise:
    """The smoke's prompts sent to a ready server, the launch watched all along."""

    def __init__(self, session: Session, server: Server, method: str):
        self.session, self.server, self.method = session, server, method

    def run(self, watch: Watch, measure: bool) -> tuple[list[Answer], Acceptance | None]:
        """The answers checked; when ``measure``, the acceptance of exactly these requests, and of each kind of prompt
        (prompts.py) from the counters read around that kind's requests."""
        model = self.server.model()
        options = self.session.options
        groups = by_kind(options.prompts)
        reads = [self.server.metrics()] if measure else []  # before the first kind's requests, then after each kind's
        answers = []
        for _, texts in groups:
            for text in texts:
                answers.append(self._ask(watch, model, text))
                watch.pump(0.0)  # an engine can answer 200 and die on the request
            if measure:
                reads.append(self.server.metrics())
        self.session.note("requests", f"{sum(a.ok for a in answers)} of {len(answers)} answers right")
        if not measure:
            return answers, None
        watch.check_alive()
        figures, kinds = None, {}
        if self.server.serving.engine == "sglang":  # its gauges read 0 once idle: each request's own figures
            metas: list[tuple[str, list[dict]]] = []
            for kind, texts in groups:
                metas.append((kind, [m for m in (self.server.generate(t, options.max_tokens) for t in texts) if m]))
                watch.pump(0.0)
            figures = meta_acceptance([m for _, ms in metas for m in ms], self.method, self.server.serving, reads[-1],
                                      self.server.metrics())
            if figures is not None:
                kinds = {kind: f.mean_acceptance_length for kind, ms in metas if kind
                         for f in [meta_acceptance(ms, self.method)] if f and f.mean_acceptance_length is not None}
        if figures is None:
            figures = acceptance(reads[0], reads[-1], self.server.serving, self.method, requests=len(options.prompts))
            kinds = {kind: f.mean_acceptance_length for i, (kind, texts) in enumerate(groups) if kind
                     for f in [acceptance(reads[i], reads[i + 1], self.server.serving, self.method, requests=len(texts))]
                     if f.mean_acceptance_length is not None}
        figures = self._held_against_twin(figures, kinds)
        if figures.acceptance_rate is not None:
            self.session.note("metrics", f"acceptance rate {figures.acceptance_rate:.3f}, mean acceptance length "
                                         f"{figures.mean_acceptance_length or 0:.2f}")
        if kinds:
            self.session.note("metrics", "acceptance length by kind: " + ", ".join(f"{k} {v:.2f}" for k, v in kinds.items()))
        return answers, figures

    def _held_against_twin(self, figures: Acceptance, kinds: dict[str, float]) -> Acceptance:
        """The figures (and those of each kind of prompt) held against the drafter's published twin, else its method's
        range (metrics.expected)."""
        from ..core.errors import SpecauditError
        from ..launch.command import parse_launch_command, strip_assignments

        try:
            command = parse_launch_command(strip_assignments(list(self.session.options.argv))[0])
        except SpecauditError:
            return replace(figures, by_kind=kinds)
        spec = command.speculative
        # the tokens drafted per step: vLLM's num_speculative_tokens; SGLang's chain drafts --speculative-num-steps
        draft_tokens = command.options.get("speculative_num_steps") if command.engine == "sglang" \
            else spec.get("num_speculative_tokens")
        count = str(draft_tokens) if draft_tokens is not None else ""
        return expected(figures, self.method, str(spec.get("model") or ""), str(command.model or ""),
                        int(count) if count.isdigit() else None, by_kind=kinds)

    def _ask(self, watch: Watch, model: str | None, prompt: str) -> Answer:
        """One completion; while it is in flight the log is still watched, so a crash ends the wait at once."""
        max_tokens = self.session.options.max_tokens
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, **COMPLETION}
        reply: list[tuple[int, str]] = []
        request = threading.Thread(target=lambda: reply.append(self.server.complete(body)), daemon=True)
        request.start()
        while request.is_alive():
            request.join(0.2)
            watch.pump(0.0)
        status, text = reply[0]
        return check_answer(prompt, status, text, max_tokens)


def check_answer(prompt: str, status: int, text: str, max_tokens: int) -> Answer:
    """An answer is right when it is a completion without an error body and of exactly max_tokens tokens
    (the requests ask for ignore_eos): a 200 alone proves little."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return Answer(prompt, False, "", None, None, f"HTTP {status}, not JSON: {text[:200]!r}")
    if status != 200 or not isinstance(data, dict) or "error" in data or data.get("object") == "error":
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
        return Answer(prompt, False, "", None, None, f"HTTP {status} with an error: {str(message)[:300]}")
    choices = data.get("choices") or []
    if not choices:
        return Answer(prompt, False, "", None, None, "no choices in the answer")
    choice, usage = choices[0] if isinstance(choices, list) else None, data.get("usage") or {}
    if not isinstance(choice, dict) or not isinstance(usage, dict) or not isinstance(choice.get("text") or "", str):
        return Answer(prompt, False, "", None, None, f"not a completion: {text[:200]!r}")  # an answer of another shape
    tokens, produced = choice.get("token_ids"), usage.get("completion_tokens")
    problem = ""
    if produced is not None and produced != max_tokens:
        problem = f"{produced} tokens instead of {max_tokens} (finish_reason {choice.get('finish_reason')})"
    elif not choice.get("text") and not tokens:
        problem = "an empty answer"
    return Answer(prompt, not problem, choice.get("text") or "", tokens, produced, problem)


def compare_answers(with_drafter: list[Answer], without: list[Answer]) -> Lossless:
    """Greedy answers with the drafter and without it, which must be identical: the first difference of each."""
    differences = []
    for a, b in zip(with_drafter, without):
        left = a.token_ids if a.token_ids is not None and b.token_ids is not None else list(a.text)
        right = b.token_ids if a.token_ids is not None and b.token_ids is not None else list(b.text)
        if left != right:
            at = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), min(len(left), len(right)))
            unit = "token" if a.token_ids is not None and b.token_ids is not None else "character"
            differences.append(f"{a.prompt!r}: {unit} {at} differs ({left[at:at + 1]} with the drafter, "
                               f"{right[at:at + 1]} without)")
    return Lossless(not differences, min(len(with_drafter), len(without)), differences)
