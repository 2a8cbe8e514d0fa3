"""A panel's claim: the one analysis every reader states (docs/uncertainty.md).

**Units, paired by prompt, nested in blocks** (:mod:`.units`). Every config of a panel is sent
the same prompts; each repeat (round) is a block that measures every config once, in an order
drawn afresh per block. A config's throughput is the ratio of sums Σ T / Σ E over its units.
Two configs are compared by the per-prompt paired log ratio d = log(T_i/E_i) − log(T_j/E_j),
averaged within each block: D_ij is the mean of the block means (the log of the geometric-mean
speedup), s_ij = sd(block means)/√B and Student t with B − 1 degrees of freedom. A prompt that
is slow for one config is slow for all, and cancels in d; a change of the machine's speed
between two configs' stretches of one block does not, and the block-level error holds it. With
one block (a fixed plan with one repeat) the prompts are the sample of the speedup's interval,
but nothing separates a config from the time it was measured at: the claim is **undecided**, no
config is shown slower (every measured config stays in the set) and the leader has no bound, with
the reason :data:`ONE_BLOCK` (``reason``), which every reader states.

**The best: multiple comparisons with the best** (Hsu 1996, ch. 4; one-sided, constrained).
With d_ij the t quantile at 1 − α / (2 (k − 1)) (Bonferroni over the k − 1 comparisons of the
true best with the others, at the two-sided level of the speedup intervals, so that a config
"shown slower" than the leader is one whose interval against it excludes 1 on every page): config
i is in the **confidence set** when no other config is shown faster, min_j (D_ij + d_ij s_ij) > 0;
the set holds the true best with probability ≥ 1 − α. The leader (highest throughput) is
**ε-good**: at most ε slower than the true best, with
ε = 1 − exp(min(0, min_{j in set} (D_lj − d_lj s_lj))), simultaneously.

**The decision** (``decision``): ``decided`` when the set is the leader alone (it is the best);
``tie`` when the leader is shown within ``equivalence`` (default 5 %) of the best while others
cannot be excluded (any of them may be the best, the leader is at most ε behind it);
``undecided`` otherwise, and always from one block (above). Both ``decided`` and ``tie`` end a
budgeted sweep's panel. Configs measured exactly alike (zero spread: an n-gram drafter that
never drafts has τ 1.00 in every prompt, as ``auto``) are a tie: each bound is 0, and a config
is in the set unless another is shown faster (its bound below 0).

**The speedup vs the baseline** (auto): the paired ratio over the units both measured, its
two-sided interval simultaneous over the panel's k − 1 other configs (Bonferroni, α / (k − 1)),
so picking the leader does not shrink it; its bounds use the same quantile as the set, so the
baseline is shown slower than the leader exactly when the leader's interval is above 1.

**Looks.** A budgeted sweep looks after each round; look m spends α_m = A(τ_m) − A(τ_{m−1}) of a
Lan-DeMets spending function A (O'Brien-Fleming type by default, Pocock type on request) at the
information τ = rounds seen / rounds planned, and the last look spends what is left (Lan &
DeMets 1983); by the union bound every look's claim holds together with probability ≥ 1 − α.
A fixed plan is one look at α.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import ParamsError
from ..model.quantities import OUTPUT_RATE
from ..model.records import CellRecord
from .units import Paired, Units, paired, units_of

ALPHA = 0.05
EQUIVALENCE = 0.05  # decided once the leader is shown within 5 % of the best
DECISIONS = ("decided", "tie", "undecided")
MIN_UNITS = 2  # the fewest blocks (one block: prompts) a comparison needs to exclude or bound
MIN_LOOK_ALPHA = 1e-9  # a look that could spend less than this is not taken (it could say nothing)
# why a claim of one block is undecided (every reader states it: best.verdict_words)
ONE_BLOCK = ("one block: each config was measured in one stretch of time, so a change of the "
             "machine's speed between them cannot be told from an effect (measure in two blocks "
             "or more: repeats 2, or a time budget)")


@dataclass(frozen=True)
class Row:
    """One config of a claim: its throughput, its speedup vs the baseline (simultaneous over
    the panel's configs), whether it is in the set, and how far behind the best it may be."""

    config: str
    tok_s: float
    speedup: float
    speedup_lo: float
    speedup_hi: float
    in_set: bool
    behind_max: float  # at most this fraction slower than the best (1.0: no bound)
    requests_n: int
    units_n: int


@dataclass(frozen=True)
class Claim:
    """A panel's claim (see the module): leader, set, decision, ε, speedup and rows."""

    leader: str | None
    members: tuple[str, ...]
    decision: str
    epsilon: float  # the leader is at most this fraction slower than the best (NaN: no bound)
    baseline: str | None
    speedup: float
    speedup_lo: float
    speedup_hi: float
    alpha: float
    equivalence: float
    rows: dict[str, Row] = field(default_factory=dict)
    blocks: int = 0  # the fewest blocks behind a config (1: confounded with its time)
    quantity: str = "output_rate"  # what it is a claim on (:mod:`~specbench_lib.model.quantities`)
    reason: str | None = None  # why it is undecided whatever its data (:data:`ONE_BLOCK`)

    @property
    def decided(self) -> bool:
        return self.decision in ("decided", "tie")

    @property
    def confounded(self) -> bool:
        """One block: a config cannot be told from the time it was measured at."""
        return self.leader is not None and self.blocks < 2


def t_quantile(p: float, df: int) -> float:
    """The Student t quantile at ``p`` with ``df`` degrees of freedom (NaN below 1)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p)) if df >= 1 else float("nan")


def _bound(diff: float, se: float, n: int, p: float, sign: int, least: int = 2) -> float:
    """diff + sign · t · se, ±inf (no bound) where the SE is unknown or from fewer than
    ``least`` units."""
    if se != se or n < max(2, least):
        return sign * math.inf
    # no spread: the bound is the difference (a tie of configs measured alike is 0, not NaN)
    return diff + sign * t_quantile(p, n - 1) * se if se > 0 else diff


def _pairs(units: Mapping[str, Units], configs: Sequence[str]) -> dict[tuple[str, str], Paired]:
    """Every ordered pair's paired comparison (each pair computed once: j, i is −(i, j))."""
    found: dict[tuple[str, str], Paired] = {}
    for x, i in enumerate(configs):
        for j in configs[x + 1:]:
            one = paired(units[i], units[j])
            found[i, j], found[j, i] = one, replace(one, diff=-one.diff)
    return found


def claim(units: Mapping[str, Units], order: Sequence[str], baseline: str | None, *,
          alpha: float = ALPHA, equivalence: float = EQUIVALENCE,
          quantity: str = OUTPUT_RATE.name) -> Claim:
    """The claim of a panel (see the module) from each config's ``units`` (``order``: the
    panel's configs in plan order; ``baseline``: its auto config, or None) on ``quantity``,
    the units' (:func:`~.units.units_of`)."""
    check(alpha, equivalence)
    configs = [c for c in order if c in units and units[c].n and units[c].rate() > 0]
    if not configs:
        return Claim(None, (), "undecided", math.nan, baseline, math.nan, math.nan, math.nan,
                     alpha, equivalence, quantity=quantity)
    k = len(configs)
    unmeasured = [c for c in order if c not in configs]  # in contention, no data: no bound
    level = quantile_level(alpha, k + len(unmeasured))  # Bonferroni over k − 1, two-sided
    pairs = _pairs(units, configs)
    upper = {i: min((_bound(*pairs[i, j].values(), level, +1, MIN_UNITS) for j in configs if j != i),
                    default=math.inf) for i in configs}
    leader = max(configs, key=lambda c: units[c].rate())
    # the fewest blocks of a comparison (repeats measured back to back are one: .units)
    blocks = min((p.blocks for p in pairs.values() if p.units),
                 default=min(units[c].blocks for c in configs))
    reason = ONE_BLOCK if k > 1 and blocks < 2 else None  # no config shown slower in one block
    # the set, fastest first (the leader leads), then any config never measured, in plan order;
    # a config is out only when another is shown faster (a bound of 0 is a tie: zero spread)
    members = (*sorted((c for c in configs if upper[c] >= 0 or reason),
                       key=lambda c: -units[c].rate()), *unmeasured)

    def behind(i: str) -> float:
        if unmeasured or reason:
            return 1.0
        lows = [_bound(*pairs[i, j].values(), level, -1, MIN_UNITS) for j in members if j != i]
        low = min(0.0, min(lows, default=0.0))
        return 1 - math.exp(max(low, -700.0)) if low > -math.inf else 1.0

    epsilon = behind(leader) if k > 1 or len(order) < 2 else math.nan
    decision = ("undecided" if epsilon != epsilon or unmeasured or reason else
                "decided" if members == (leader,) else
                "tie" if leader in members and epsilon <= equivalence else "undecided")
    rows = {c: _row(c, units, pairs, baseline, configs, level, c in members, behind(c))
            for c in configs}
    top = rows[leader]
    return Claim(leader, members, decision, epsilon, baseline, top.speedup, top.speedup_lo,
                 top.speedup_hi, alpha, equivalence, rows, blocks=blocks, quantity=quantity,
                 reason=reason)


def quantile_level(alpha: float, configs: int) -> float:
    """The t quantile's level every bound of a claim of ``configs`` configs uses: two-sided,
    Bonferroni over the k − 1 comparisons (1 − α / (2 (k − 1)))."""
    return 1 - alpha / 2 / max(1, configs - 1)


def _row(config: str, units: Mapping[str, Units], pairs: Mapping[tuple[str, str], Paired],
         baseline: str | None, configs: Sequence[str], level: float, in_set: bool,
         behind_max: float) -> Row:
    mine = units[config]
    nan = math.nan
    if baseline is None or baseline not in configs:
        low = high = speed = nan
    elif config == baseline:  # itself: 1 exactly, with an "interval" only where it could have one
        speed, low, high = 1.0, *((1.0, 1.0) if mine.n >= 2 else (nan, nan))
    else:
        diff, se, n = pairs[config, baseline].values()
        speed = _exp(diff)
        low, high = (_exp(_bound(diff, se, n, level, -1)) if se == se else nan,
                     _exp(_bound(diff, se, n, level, +1)) if se == se else nan)
    return Row(config, mine.rate(), speed, low, high, in_set, behind_max, mine.requests, mine.n)


def _exp(value: float) -> float:
    """exp, +inf past the float range (a look at a tiny error has a huge reach)."""
    return math.exp(value) if value < 700 else math.inf


def check(alpha: float, equivalence: float) -> None:
    """A clear error for an error rate or margin out of range."""
    if not 0 < alpha < 1:
        raise ParamsError(f"a claim's error alpha must be between 0 and 1, not {alpha!r}",
                          key="alpha", value=alpha)
    if not equivalence >= 0:
        raise ParamsError(f"equivalence margin {equivalence!r}: it must be a fraction >= 0 "
                          f"(0.05 is 5 %); give a non-negative number", key="equivalence",
                          value=equivalence)


def spent(tau: float, alpha: float = ALPHA, kind: str = "obf") -> float:
    """The error a Lan-DeMets spending function has spent by information ``tau`` (0-1):
    Pocock type α · ln(1 + (e − 1) τ), or O'Brien-Fleming type 2 − 2 Φ(z(1 − α/2) / √τ)."""
    from scipy.special import ndtr, ndtri

    tau = min(1.0, max(0.0, tau))
    if tau == 0:
        return 0.0
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * tau)
    if kind == "obf":
        return float(2 - 2 * ndtr(ndtri(1 - alpha / 2) / math.sqrt(tau)))
    raise ParamsError(f"alpha spending {kind!r}: use 'pocock' or 'obf'", key="alpha_spending",
                      value=kind)


def look_alpha(seen: float, planned: float, before: float, *, last: bool,
               alpha: float = ALPHA, kind: str = "obf") -> float:
    """The error a look may spend: at information ``seen / planned`` the spending function's
    total less what earlier looks spent (``before``); the last look spends all that is left."""
    if planned <= 0 or seen <= 0:
        raise ParamsError(f"a look at {seen} of {planned} rounds: a look needs data",
                          key="max_rounds", value=planned)
    total = alpha if last else spent(seen / planned, alpha, kind)
    return max(0.0, total - before)


def behind_text(fraction: float, worse: str = "slower") -> str:
    """"at most 2.1 % slower than the best" (or "no bound yet"; ``worse``: the quantity's word)."""
    if fraction != fraction or fraction >= 1:
        return "no bound yet on how far it is behind the best"
    if fraction <= 0:
        return "the best"
    return f"at most {100 * fraction:.1f} % {worse} than the best"


Panel = tuple[Any, ...]


def panel_of_cell(cell: CellRecord) -> Panel:
    """A cell's panel: its values of :data:`~specbench_lib.model.tablekeys.PANEL`."""
    from ..model.tablekeys import PANEL

    row = cell.spec.row()
    return tuple(row[k] for k in PANEL)


def panel_claims(cells: Sequence[CellRecord], *, alphas: Mapping[Panel, float] | None = None,
                 equivalence: float = EQUIVALENCE,
                 configs: Mapping[Panel, Sequence[str]] | None = None,
                 quantity: str = OUTPUT_RATE.name) -> dict[Panel, Claim]:
    """Every panel's claim on ``quantity`` (:mod:`~specbench_lib.model.quantities`) from a
    run's cells: its configs in the order they come (or ``configs``), its baseline the first
    ``auto`` config, at the panel's error in ``alphas`` (a budgeted run's last look;
    :data:`ALPHA` otherwise)."""
    by_panel: dict[Panel, dict[str, list[CellRecord]]] = {}
    baselines: dict[Panel, str] = {}
    for cell in cells:
        panel = panel_of_cell(cell)
        mine = by_panel.setdefault(panel, {}).setdefault(cell.spec.config, [])
        if cell.verdict.ok or cell.status == "invalid" or cell.verdict.by_design:
            mine.append(cell)  # a crashed (or known bad) config is out, not in contention
        if cell.spec.method == "auto":
            baselines.setdefault(panel, cell.spec.config)
    found = {}
    for panel, by_config in by_panel.items():
        given = list((configs or {}).get(panel) or ())
        units = {c: units_of(v, quantity) for c, v in by_config.items()}
        # a config with no ok request is out, as a budgeted run's contest puts it (rounds.py)
        order = [c for c in [*given, *(c for c in by_config if c not in given)]
                 if c in units and units[c].n]
        found[panel] = claim(units, order, baselines.get(panel),
                             alpha=(alphas or {}).get(panel, ALPHA), equivalence=equivalence,
                             quantity=quantity)
    return found


def claim_columns(table: Any, claims: Mapping[Panel, Claim], column: str = "speedup") -> Any:
    """``table`` (one row per config × panel) with ``column`` and ``column_lo/hi`` from the
    panel's claim (paired by prompt, simultaneous over the panel's configs)."""
    from ..model.tablekeys import PANEL

    speed, low, high = [], [], []
    for row in table.to_dict("records"):
        panel = tuple(None if _missing(row[k]) else row[k] for k in PANEL)
        found = claims.get(panel)
        mine = found.rows.get(str(row["config"])) if found is not None else None
        speed.append(mine.speedup if mine else math.nan)
        low.append(mine.speedup_lo if mine else math.nan)
        high.append(mine.speedup_hi if mine else math.nan)
    return table.assign(**{column: speed, f"{column}_lo": low, f"{column}_hi": high})


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def more_units(units: Mapping[str, Units], found: Claim) -> int | None:
    """About how many more requests per config would show the leader within the margin, as
    the standard errors shrink with √n at the same error (n: the blocks, at as many requests a
    block as so far; None where no number of requests would, by the estimates now)."""
    return closest_call(units, found)[0]


def closest_call(units: Mapping[str, Units], found: Claim) -> tuple[int | None, str | None]:
    """:func:`more_units` and the set member whose comparison with the leader needs them (the
    closest call: the spread that sets the number; None with it)."""
    if found.leader is None or found.decided or found.reason:  # more of one block: no decision
        return None, None
    top = units[found.leader]
    one = quantile_level(found.alpha, len(found.rows))
    floor = math.log(1 - found.equivalence) if found.equivalence < 1 else -math.inf
    need, against = float(top.n), None
    for other in found.members:
        if other == found.leader:
            continue
        diff, se, n = paired(top, units[other]).values()
        if se != se or n < 2 or diff <= floor:
            return None, None
        reach = t_quantile(one, n - 1) * se
        mine = n * (reach / (diff - floor)) ** 2 * top.n / n  # in units
        if mine >= need:
            need, against = mine, other
    per_unit = top.requests / max(1, top.n)
    return max(1, math.ceil((math.ceil(need) - top.n) * per_unit)), against
