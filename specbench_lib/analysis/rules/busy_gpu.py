"""``busy_gpu``: another's compute process ran on the cell's GPUs
(:func:`~specbench_lib.analysis.energy.foreign_processes`, from nvidia-smi's process list)."""

from __future__ import annotations

from ...model.catalogue import C, Threshold
from ...model.hostfacts import HostLoad
from ...model.verdict import Reason, Verdict
from ..energy import foreign_processes
from ..rule import Judged, Rule


class BusyGpu(Rule):
    code = "busy_gpu"
    protects = ("numbers measured while another process ran on the cell's GPUs (another job's "
                "CUDA context, a stray server): a compute process on them, neither this sweep's, "
                "its server's nor a placed co-tenant's, holding more than host.max_other_gpu_mib "
                "MiB (nvidia-smi's process list during the cell) makes it invalid")
    # a cell without it was measured before the rule: not judged
    thresholds = (Threshold("host.max_other_gpu_mib", 0.0, judged_when_absent=False),)
    order = 80

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        return judge_gpu(verdict, cell.facts.host, self.limit(cell, "host.max_other_gpu_mib"))


def judge_gpu(verdict: Verdict, host: HostLoad | None, max_other_gpu_mib: float | None) -> Verdict:
    """An ok or invalid cell whose GPUs ran another's compute process becomes ``invalid`` with
    ``busy_gpu``, naming the processes, their memory and the GPUs' mean utilisation."""
    if max_other_gpu_mib is None or verdict.status not in ("ok", "invalid"):
        return verdict
    found = foreign_processes(host, max_other_gpu_mib)
    if not found or host is None:
        return verdict
    gpus = {g["index"]: g.get("util_mean") for g in (host.gpu or {}).get("gpus") or ()}
    named = ", ".join(f"pid {p['pid']} {p.get('name') or '?'} on GPU {p.get('gpu')} "
                      f"({float(p.get('used_mib') or 0):g} MiB)" for p in found[:5])
    util = ", ".join(f"GPU {k} {v:g} %" for k, v in sorted(gpus.items()) if v is not None)
    reason = Reason(C.busy_gpu, (
        f"another process ran on the cell's GPUs during its {host.window_s:.1f} s: {named} "
        f"(more than host.max_other_gpu_mib {max_other_gpu_mib:g} MiB; mean utilisation "
        f"{util or 'not read'}); the server, co-tenant servers and this sweep are not counted. "
        f"Stop it, or place the sweep on free GPUs, and resume the run; or set "
        f"host.max_other_gpu_mib (null: not judged)"))
    return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
