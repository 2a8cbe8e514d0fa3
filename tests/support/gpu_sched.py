"""The emulator's scheduler: SGLang's loop on an emulated GPU clock (tests and benchmarks only).

Each turn runs a prefill batch when a waiting request fits the KV pool (chunks of at most
``chunk`` tokens; its last chunk makes the request's first token), else one decode step of every
running request (τ tokens each under speculation, drawn per request and step). A turn takes
the GPU time gpu_model.py gives it, divided by the time scale, in real time. Admission is
SGLang's: a request is let in while the pool holds the running requests' tokens plus their
remaining answers × ``new_token_ratio`` (0.7 at start, decaying); a decode step that overflows
the pool retracts the newest request to the front of the queue (its KV dropped, prefilled again
later) and raises the ratio, and the log says so as SGLang's does.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_accept import StepDraw
from gpu_model import Hardware, drafter_share
from gpu_truth import Config, Truth, step_time

INIT_TOKEN_RATIO = 0.7  # assumed: SGLang's initial new_token_ratio
MIN_TOKEN_RATIO = 0.1
RATIO_DECAY = 0.001  # a decode step
RETRACT_BUMP = 0.3
MAX_AHEAD_S = 0.0003  # the loop runs ahead of real time by at most this before it sleeps


@dataclass
class Request:
    """One generation in the emulator: its sizes, its drawn acceptance and its counters."""

    prompt: int
    max_new: int
    target: int  # tokens it will produce (its answer's length, or max_new without EOS)
    draw: StepDraw | None
    drafts: int  # drafted tokens a verify step proposes
    events: queue.Queue[tuple[int, bool]] = field(default_factory=queue.Queue)
    produced: int = 0
    prefilled: int = 0
    verify_ct: int = 0
    correct: int = 0
    histogram: list[int] = field(default_factory=list)
    retractions: int = 0
    arrived: float = 0.0  # emulated times: sent, first token, last token
    first_at: float = 0.0
    last_at: float = 0.0
    done: bool = False

    def decode_rate(self) -> float:
        """Tokens after the first over the emulated time after the first (0 for one token)."""
        span = self.last_at - self.first_at
        return (self.produced - 1) / span if span > 0 and self.produced > 1 else 0.0

    @property
    def context(self) -> int:
        """Tokens to prefill before it decodes (its prompt, and what it made before a retraction)."""
        return self.prompt + self.produced

    def spec_meta(self) -> dict[str, Any]:
        """SGLang 0.5.23's per-request speculative fields (tokenizer_manager.py:3138-3210)."""
        if not self.verify_ct:
            return {}
        proposed = self.verify_ct * self.drafts
        return {"spec_verify_ct": self.verify_ct, "spec_num_correct_drafts": self.correct,
                "spec_num_proposed_drafts": proposed,
                "spec_accept_rate": self.correct / proposed if proposed else 0.0,
                "spec_accept_length": self.produced / self.verify_ct,
                "spec_correct_drafts_histogram": list(self.histogram)}


class Core:
    """SGLang's schedule on the emulated clock, without threads: :meth:`turn` plans the next
    batch and gives its GPU seconds and what to apply when they have passed."""

    def __init__(self, hw: Hardware, truth: Truth, config: Config, *, pool: int, max_running: int,
                 chunk: int, log: Any = print) -> None:
        self.hw, self.truth, self.config = hw, truth, config
        self.pool, self.max_running, self.chunk = pool, max_running, chunk
        self.log = log
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.ratio = INIT_TOKEN_RATIO
        self.clock = 0.0  # emulated GPU seconds
        self.stats = {"retractions": 0, "prefill_s": 0.0, "decode_s": 0.0, "steps": 0,
                      "peak_running": 0, "lag_s": 0.0}
        self.prefill_factor = 1.0 + (drafter_share(hw.model) if config.method != "auto" else 0.0)

    def turn(self) -> tuple[float, Callable[[], None]]:
        chunks = self._admit()
        self.stats["peak_running"] = max(self.stats["peak_running"], len(self.running))
        if chunks:
            cost = self._prefill_cost(chunks)
            self.stats["prefill_s"] += cost
            return cost, lambda: self._prefilled(chunks)
        batch = [r for r in self.running if r.prefilled >= r.context]
        kv = sum(r.context for r in batch) / max(1, len(batch))
        cost = step_time(self.hw, self.truth, self.config, max(1, len(batch)), kv)
        self.stats["decode_s"] += cost
        self.stats["steps"] += 1
        return cost, lambda: self._decoded(batch)

    def _used(self) -> float:
        """Pool tokens held and promised: each running request's tokens, plus its remaining
        answer × the new-token ratio."""
        return sum(r.context + (r.max_new - r.produced) * self.ratio for r in self.running)

    def _admit(self) -> list[tuple[Request, int, int]]:
        """The next prefill batch: chunks of requests already prefilling first, then waiting ones
        that fit the pool, ``chunk`` tokens in all at most."""
        chunks, budget = [], self.chunk
        for r in self.running:
            if r.prefilled < r.context and budget > 0:
                end = min(r.context, r.prefilled + budget)
                chunks.append((r, r.prefilled, end))
                budget -= end - r.prefilled
        while self.waiting and budget > 0 and len(self.running) < self.max_running:
            r = self.waiting[0]
            if self._used() + r.context + r.max_new * self.ratio > self.pool and self.running:
                break
            self.waiting.pop(0)
            self.running.append(r)
            end = min(r.context, budget)
            chunks.append((r, 0, end))
            budget -= end
        return chunks

    def _prefill_cost(self, chunks: list[tuple[Request, int, int]]) -> float:
        hw, tokens = self.hw, sum(b - a for _, a, b in chunks)
        pairs = sum(b * b - a * a for _, a, b in chunks)
        cost = hw.overhead + max(hw.weights, tokens * hw.c_tok) + pairs * hw.c_pair
        return cost * self.prefill_factor

    def _prefilled(self, chunks: list[tuple[Request, int, int]]) -> None:
        for r, _, end in chunks:
            r.prefilled = end
            if end >= r.context and r.produced == 0:  # the prefill's forward makes token one
                r.produced = 1
                self._emit(r, 1)

    def _decoded(self, batch: list[Request]) -> None:
        self.ratio = max(MIN_TOKEN_RATIO, self.ratio - RATIO_DECAY)
        for r in batch:
            if r.draw is None:
                made = 1
            else:
                accepted = r.draw.accepted()
                made = accepted + 1
                r.verify_ct += 1
                if len(r.histogram) <= accepted:
                    r.histogram.extend([0] * (accepted + 1 - len(r.histogram)))
                r.histogram[accepted] += 1
            made = min(made, r.target - r.produced)
            if r.draw is not None:
                r.correct += made - 1
            r.produced += made
            r.prefilled = r.context
            self._emit(r, made)
        if sum(r.context for r in self.running) > self.pool:
            self._retract()

    def _emit(self, r: Request, made: int) -> None:
        if r.first_at == 0.0:
            r.first_at = self.clock
        r.last_at = self.clock
        r.done = r.produced >= r.target
        if r.done:
            self.running.remove(r)
        r.events.put((made, r.done))

    def _retract(self) -> None:
        """SGLang's decode retraction: the newest running request back to the queue's front."""
        victim = self.running.pop()
        victim.prefilled = 0
        victim.retractions += 1
        self.waiting.insert(0, victim)
        old, self.ratio = self.ratio, min(1.0, self.ratio + RETRACT_BUMP)
        self.stats["retractions"] += 1
        self.log(f"KV cache pool is full. Retract requests. #retracted_reqs: 1, "
                 f"#new_token_ratio: {old:.4f} -> {self.ratio:.4f}")


class Scheduler(Core):
    """:class:`Core` on a real clock: a thread runs its turns, each taking its GPU seconds
    divided by ``scale`` of real time; :meth:`submit` hands a request in, whose ``events`` queue
    then gets ``(tokens made, finished)`` as the emulated GPU makes them."""

    def __init__(self, *args: Any, scale: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scale = scale
        self.cond = threading.Condition()
        self.t0 = time.monotonic()
        threading.Thread(target=self._loop, daemon=True).start()

    def busy(self) -> bool:
        with self.cond:
            return bool(self.waiting or self.running)

    def submit(self, request: Request) -> None:
        with self.cond:
            request.arrived = max(self.clock, self._now())
            self.waiting.append(request)
            self.cond.notify()

    def _now(self) -> float:
        return (time.monotonic() - self.t0) * self.scale

    def _loop(self) -> None:
        while True:
            with self.cond:
                if not (self.waiting or self.running):
                    while not (self.waiting or self.running):
                        self.cond.wait()
                    self.clock = max(self.clock, self._now())  # an idle GPU waited for work
                cost, apply = self.turn()
            ahead = (self.clock + cost - self._now()) / self.scale
            if ahead > MAX_AHEAD_S:
                time.sleep(ahead)
            with self.cond:
                self.clock += cost
                self.stats["lag_s"] = max(0.0, (self._now() - self.clock) / self.scale)
                apply()


def simulate(core: Core, make: Callable[[], Request], *, concurrency: int, requests: int,
             stagger: float = 0.0) -> list[Request]:
    """A closed loop of ``concurrency`` clients on :class:`Core` in emulated time only (no
    client latency): client i sends its first request at i × ``stagger`` GPU seconds, then its
    next one when its last one ends, ``requests`` in all. The finished requests carry their
    emulated first- and last-token times."""
    pending = [make() for _ in range(min(concurrency, requests))]
    for i, r in enumerate(pending):
        r.arrived = i * stagger
    sent, finished = list(pending), list[Request]()
    while len(finished) < requests:
        due = [r for r in pending if r.arrived <= core.clock]
        core.waiting.extend(due)
        pending = [r for r in pending if r not in due]
        if not (core.waiting or core.running):
            core.clock = min(r.arrived for r in pending)
            continue
        cost, apply = core.turn()
        core.clock += cost
        apply()
        for r in [r for r in sent if r.done and r not in finished]:
            finished.append(r)
            if len(sent) < requests:
                new = make()
                new.arrived = core.clock
                sent.append(new)
                core.waiting.append(new)
    return finished


def new_request(config: Config, truth: Truth, *, task: str, prompt: int, max_new: int, eos: bool,
                temperature: float, rng: random.Random,
                text: random.Random | None = None) -> Request:
    """A request with its acceptance drawn: α from the task's Beta, the tree built on the task's
    α (the drafter's belief) and walked with the drawn one; its answer's length from the task's
    log-normal when it ends at EOS. ``text``: the prompt's own draws (seeded by its tokens), so
    every config answers a prompt alike: its α (how predictable its answer is) always, and at
    temperature 0 the answer itself (its length, the steps' draws), as greedy speculative
    decoding gives every config the same text; ``rng`` draws the rest (None ``text``: all)."""
    from gpu_truth import Panel, paths, task_alpha

    own = text or rng
    answer = own if temperature == 0 else rng  # a sampled answer differs from draw to draw
    panel = Panel(task, prompt, 1, max_new, eos, temperature)
    target = max_new
    length = answer.lognormvariate(0.0, 0.6)  # drawn always, so the draws after it line up
    if eos:
        target = max(1, min(max_new, int(length * truth.get(f"answer.{task}"))))
    if config.method == "auto":
        return Request(prompt, max_new, target, None, 0)
    alpha, share, spread = task_alpha(truth, panel), truth.get(f"share.{task}"), truth.get("spread")
    drawn = own.betavariate(alpha * spread, (1 - alpha) * spread) if spread > 0 else alpha
    draw = StepDraw(paths(config, alpha, share), drawn, share, random.Random(answer.random()))
    return Request(prompt, max_new, target, draw, config.verified - 1)


def simulated_rate(config: Config, truth: Truth, hw: Hardware, *, task: str, prompt: int,
                   max_new: int, eos: bool, concurrency: int, requests: int = 40,
                   mem_fraction: float = 0.85, seed: int = 0) -> float:
    """The emulator's own decode rate in a panel (tokens after the first over the time after
    the first, summed over ``requests`` in a steady loop), by :func:`simulate` in emulated time:
    what gpu_truth.expected approximates in closed form."""
    spec = config.method != "auto"
    pool = hw.pool_tokens(mem_fraction, drafter_share(hw.model) if spec else 0.0)
    core = Core(hw, truth, config, pool=pool, max_running=48 if spec else 1024, chunk=8192,
                log=lambda line: None)
    rng = random.Random(seed)
    # clients start a cycle's share apart, as real ones drift apart: no closed loop in lock step
    cycle = hw.prefill_total(prompt) + max_new * hw.forward(concurrency, concurrency, prompt)
    done = simulate(core, lambda: new_request(config, truth, task=task, prompt=prompt, max_new=max_new,
                                              eos=eos, temperature=0.0, rng=rng),
                    concurrency=concurrency, requests=requests + 2 * concurrency,
                    stagger=cycle / concurrency)
    # the steady state: by the order they were sent (the order they ended would favour the
    # short ones), without the first and last ``concurrency`` (a loop filling and draining)
    steady = sorted(done, key=lambda r: r.arrived)[concurrency:len(done) - concurrency]
    span = sum(r.last_at - r.first_at for r in steady)
    return sum(r.produced - 1 for r in steady) / span if span > 0 else 0.0


def simulated_best(configs: list[Config], truth: Truth, hw: Hardware, *, task: str, prompt: int,
                   max_new: int, eos: bool, concurrency: int, requests: int = 40,
                   seed: int = 0) -> tuple[str, dict[str, float]]:
    """The best config of a panel by :func:`simulated_rate` (the emulator's own schedule; the
    closed form, gpu_truth.best, is within about 25 % of it above concurrency 1), and every
    config's rate."""
    rates = {c.name: simulated_rate(c, truth, hw, task=task, prompt=prompt, max_new=max_new, eos=eos,
                                    concurrency=concurrency, requests=requests, seed=seed)
             for c in configs}
    return max(rates, key=lambda n: rates[n]), rates
