"""What a config's server says about its cells when it fails: a crash in an earlier cell,
crash evidence from start-up or warmup (which taints every cell), a server that could not start
or answers what its adapter cannot read. Facts only, stored in the cells; the verdicts are the
catalogue's (:mod:`~specbench_lib.model.catalogue`)."""

from __future__ import annotations

from typing import Any

from ..core.errors import ControlTimeout, EngineError, ServerError, SpecMismatch, TreeMaskIgnored
from ..model.catalogue import C
from ..model.hostfacts import HostLoad
from ..model.records import CellFacts
from ..model.served import ServedBefore
from ..model.verdict import Reason, Verdict
from .process import Server

DIED_EARLIER = Reason(C.server_died_earlier, "the server crashed in an earlier cell of this config")


def dead_facts(proc: Server, verdict: Verdict, base: int) -> CellFacts:
    """The facts of a cell its config's server cannot measure any more (it died): ``verdict``
    with the server's exit, crash line and log tail."""
    return CellFacts(decided=verdict, server_alive=False, returncode=proc.returncode,
                     crash_line=proc.crash_signature(base), log_excerpt=proc.log_tail(40))


def before_cells(proc: Server, base: int, ready_at: int, offset: int) -> CellFacts | None:
    """Crash evidence from start-up or warmup, which taints every cell of the config (the
    cells keep the warmup requests, so their verdict also names what those met)."""
    line = proc.crash_signature(base, offset)
    alive = proc.healthy()
    if line is None and alive:
        return None
    if line is not None:
        phase = "start-up" if proc.crash_signature(base, ready_at) else "warmup"
        line = f"{line} (in the server log during {phase})"
    return CellFacts(server_alive=alive, crash_line=line,
                     returncode=proc.returncode if alive else proc.exit_status(),
                     log_excerpt=proc.log_tail(40))


def failed_facts(proc: Server, exc: ServerError | EngineError, base: int) -> CellFacts:
    """The config's cells when its server could not be started or answered what its adapter
    cannot read: ``invalid`` with the fix while the server is up, else ``crashed``."""
    signature = proc.crash_signature(base)
    if isinstance(exc, EngineError) and proc.healthy() and signature is None:
        if isinstance(exc, TreeMaskIgnored):
            reason = Reason(C.tree_mask_ignored, f"{exc}: no cell of it is measured")
        elif isinstance(exc, SpecMismatch):
            reason = Reason(C.spec_mismatch, f"{exc}: no cell of it is measured; use an engine "
                            "build that runs the flags as asked, or fix the config")
        elif isinstance(exc, ControlTimeout):
            reason = Reason(C.control_timeout, f"{exc}: the server is up but answers too "
                            "slowly; raise engine.control_timeout_s if it is just busy")
        elif exc.status == 404:
            reason = Reason(C.missing_endpoint, f"{exc}: the server does not offer an "
                            "endpoint specbench needs; for /tokenize set engine.tokenizer to "
                            "the model's tokenizer.json (pip install tokenizers), otherwise "
                            "use a server version that has it")
        else:
            reason = Reason(C.bad_answer, f"{exc}: the server answered what its adapter "
                            "cannot read; the server's words are in the detail")
        return CellFacts(decided=Verdict("invalid", (reason,)), log_excerpt=proc.log_tail(40))
    verdict = Verdict("crashed", (
        Reason(C.server_failed, str(exc)), Reason(C.returncode, str(proc.returncode)),
        *((Reason(C.log, signature),) if signature else ())))
    return CellFacts(decided=verdict, server_alive=False, crash_line=signature,
                     returncode=proc.returncode, log_excerpt=proc.log_tail(40))


def after_cells(proc: Server, since: int) -> dict[str, str | int | None] | None:
    """Crash evidence the server logged after its last cell ended (while idle or while it was
    stopped), when there is some: the line and its exit status. Its cells keep their verdicts
    (their requests had ended); the config is reported crashed (``crashed_after_cells``)."""
    line = proc.crash_signature(since)
    if line is None:
        return None
    return {"line": line, "returncode": proc.returncode}


def measured_facts(proc: Server, since: int, counted: dict[str, Any], host: HostLoad | None,
                   before: ServedBefore | None) -> CellFacts:
    """The facts of a measured cell: the server's state after its requests (alive, a crash
    line since ``since``; if it died, its exit and log tail), the spec counters ``counted``,
    the host's load and what the server had served before."""
    alive, line = proc.healthy(), proc.crash_signature(since)
    if alive and line is None:
        return CellFacts(server_alive=alive, crash_line=line, spec_counters=counted, host=host,
                         served_before=before)
    return CellFacts(server_alive=alive, crash_line=line,
                     returncode=proc.returncode if alive else proc.exit_status(),
                     log_excerpt=proc.log_tail(40), spec_counters=counted, host=host,
                     served_before=before)
