"""``busy_host``: other processes used the CPUs (or the hypervisor stole them) while the cell
ran (:class:`~specbench_lib.model.hostfacts.HostLoad`); a host-side rule (measured again)."""

from __future__ import annotations

from typing import Any

from ...host.sources import usable_cpus
from ...model.catalogue import C, Threshold
from ...model.hostfacts import HostLoad
from ...model.params import SweepParams
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class BusyHost(Rule):
    code = "busy_host"
    protects = ("numbers measured while other processes used the CPUs (a build, another "
                "benchmark, a spinning server) or the hypervisor stole (steal time): more than "
                "host.max_other_cpu_cores cores of the two on average during the cell, the sweep "
                "and its server not counted, makes it invalid")
    # a cell without it was measured before the rule: not judged
    thresholds = (Threshold("host.max_other_cpu_cores", "auto", judged_when_absent=False),)
    order = 70
    host_side = True

    def inputs(self, params: SweepParams) -> dict[str, Any]:
        """``auto`` is resolved on this host's CPUs when the cell is measured."""
        return {"host.max_other_cpu_cores": params.host.cpu_limit(usable_cpus())}

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        return judge_host(verdict, cell.facts.host, self.limit(cell, "host.max_other_cpu_cores"))


def judge_host(verdict: Verdict, host: HostLoad | None, max_other_cpu_cores: float | None) -> Verdict:
    """An ok or invalid cell measured on a busy host becomes ``invalid`` with ``busy_host``,
    naming the other CPU used, the threshold and the largest other processes. A cell without a
    judged load (not sampled, too short, an attached server not told apart) is left as it is."""
    if host is None or verdict.status not in ("ok", "invalid") or not host.busy(max_other_cpu_cores):
        return verdict
    stolen = host.steal_fraction or 0.0
    steal = (f" and the hypervisor stole {host.stolen_cores:.2f} ({stolen:.0%} of the CPU time)"
             if stolen >= 0.01 else "")
    load = f", load average {host.loadavg_1m_max:g}" if host.loadavg_1m_max is not None else ""
    reason = Reason(C.busy_host, (
        f"other processes used {host.other_cpu_cores:.2f} CPU cores on average{steal} during the "
        f"cell's {host.window_s:.1f} s, more than host.max_other_cpu_cores {max_other_cpu_cores:g} "
        f"({host.cpus} CPUs{load}): {host.top_text()}; the server ({host.server_cpu_cores:.2f} "
        f"cores) and this sweep ({host.own_cpu_cores:.2f}) are not counted. Stop them, or measure "
        f"on a quiet host, and resume the run (invalid cells are measured again); or raise "
        f"host.max_other_cpu_cores (null: not judged)"))
    return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
