"""What a search found, summarised from the stored trials (the same for a search, a worker, a report)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from speedopt.errors import UsageError
from speedopt.quality import Feasibility
from speedopt.speedup import Decision, Speedup
from speedopt.status import Status
from speedopt.study._ablation import Ablation
from speedopt.study._bill import Bill, Payback
from speedopt.study._compile import CompileDecision
from speedopt.study._failed import FailedTrial, failed_trials
from speedopt.study._finals import Finals
from speedopt.study._protocol import StudyProtocol
from speedopt.study._record import TrialRecord, baseline_trial, best_trial, measured_pruned, records
from speedopt.study._schema import DATA, read_ablation, read_bill, read_compile, read_finals, read_protocol, read_stopped
from speedopt.study._storage import open_storage, storage_errors
from speedopt.study.names import study_names

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class ProbedSignature:
    """One accuracy signature that was probed, and what the constraint made of it."""

    signature: dict[str, Any]
    map50_95: float
    map_loss: float | None
    feasibility: Feasibility
    baseline_map50_95: float | None
    spread: float | None  # the loss interval's half-width
    reason: str = ""


@dataclass(frozen=True)
class SearchOutcome:
    """A study's state: trial counts, the baseline, the best trial, what the quality gate did."""

    study_name: str
    by_status: dict[Status, int]
    baseline: TrialRecord | None
    best: TrialRecord | None
    probes_run: int = 0
    probe_cache_hits: int = 0
    unprobed: int = 0  # trials measured ok but never probed: they could not have been the best
    rejected: int = 0  # trials measured ok whose accuracy was judged too low
    unknown: int = 0  # trials measured ok whose accuracy the probe budget could not tell: never recommended
    unknown_why: str = ""  # the first such trial's reason (the same for all: the baseline's reference)
    probed: tuple[ProbedSignature, ...] = ()
    protocol: StudyProtocol | None = None  # None for a study speedopt did not make
    trials: tuple[TrialRecord, ...] = ()  # every measured trial, in trial order
    finals: Finals | None = None  # the leaders re-measured beside the baseline, when run
    stopped: str | None = None  # why the search stopped before its target (the space was used up)
    failed: tuple[FailedTrial, ...] = ()  # trials whose run ended early (interrupted, killed), with their retries
    pruned: int = 0  # trials the pruner stopped part-way: they ran, and count toward --trials
    bill: Bill = field(default_factory=Bill)  # what the search's runs spent, by stage
    compile: CompileDecision | None = None  # the recommendation measured eager and compiled, when the space listed modes
    ablation: Ablation | None = None  # the path from the baseline to the recommendation, when measured

    @property
    def compiled(self) -> str | None:
        """The compile mode the recommendation trains with: the compile decision's choice, where it was taken on the
        recommended trial (None: eager)."""
        rec, decision = self.recommended, self.compile
        return decision.choice if decision is not None and rec is not None and decision.trial == rec.number else None

    @property
    def complete(self) -> int:
        """Completed trials that hold a measurement."""
        return len(self.trials)

    @property
    def decision(self) -> Decision[int] | None:
        """The finals' verdict (None until the finals are complete)."""
        return self.finals.decision() if self.finals and self.finals.complete else None

    @property
    def recommended(self) -> TrialRecord | None:
        """The trial to train with (see :func:`recommended_trial`)."""
        return recommended_trial(self.trials, self.finals)

    def verdict_text(self) -> str:
        """One line: the speedup with its interval, "no measurable gain", or why no gain is claimed."""
        decision = self.decision
        if decision is not None:
            return decision.reason
        if self.finals is not None:
            return "finals incomplete: rerun the same command to finish them; no speedup claimed yet"
        return "measured once in the search, not re-measured beside the baseline (no finals): no speedup claimed"

    @property
    def speedup(self) -> Speedup | None:
        """The recommended config's speedup with its interval (None: no gain claimed)."""
        decision = self.decision
        return decision.speedup if decision else None

    @property
    def keep_settings(self) -> bool:
        """The finals found no measurable gain: the baseline is the recommendation."""
        decision = self.decision
        return decision is not None and decision.choice is None

    def risk_text(self) -> str:
        """``risk 10%: 2 confirmation(s) on 8 fresh seeds spent 7.5% of it`` (empty when quality was off): the chance
        the search took that a recommended accuracy change loses more than allowed, and what its confirmations spent."""
        q = self.protocol.quality if self.protocol else None
        if q is None or not q.probing:
            return ""
        spent = [r.confirm_risk for r in self.trials if r.confirm_risk is not None]
        return (
            f"risk {100 * q.risk:g}% that a recommended accuracy change loses more than allowed at your run's length: "
            f"{len(spent)} confirmation(s) on {q.confirm_seeds} fresh seeds spent {100 * sum(spent):.3g}% of it"
        )

    def optimizer_text(self) -> str:
        """The optimizer the trials trained, as the trainer resolved ``optimizer=auto`` for the user's whole run (the
        baseline's, and every other one a batch moved the run to); empty where no trial recorded one."""
        p = self.protocol
        ran = [r for r in self.trials if r.result.ok and r.result.optimizer]
        if p is None or not ran:
            return ""
        base = next((r for r in ran if r.is_baseline), ran[0])
        words = " ".join(base.result.optimizer_args)
        line = (f"optimizer: {base.result.optimizer}" + (f" ({words})" if words else "") +
                f", what the trainer picks for your {p.epochs}-epoch run on {p.dataset.train_images} train images at "
                f"batch {base.config.batch}; the trials trained it")
        others: dict[str, set[int]] = {}
        for r in ran:
            if r.result.optimizer != base.result.optimizer:
                others.setdefault(r.result.optimizer, set()).add(r.config.batch)
        for name, batches in sorted(others.items()):
            line += (f"; at batch {', '.join(str(b) for b in sorted(batches))} the run trains {name} instead (judged as an "
                     "accuracy change)")
        return line

    @property
    def reference_map50_95(self) -> float | None:
        """The baseline's probed mAP50-95 (mean of two seeds), when any signature was probed."""
        return self.probed[0].baseline_map50_95 if self.probed else None

    def saving_per_epoch(self) -> tuple[float | None, str]:
        """Training seconds per epoch the recommendation saves over the baseline, from the finals' medians and the
        train set's size (None without a claimed gain), and that basis in words: an estimate."""
        decision, finals, p = self.decision, self.finals, self.protocol
        if decision is None or decision.choice is None or finals is None or p is None or not p.dataset.train_images:
            return None, ""
        base, rec, n = finals.median(finals.baseline)[0], finals.median(decision.choice)[0], p.dataset.train_images
        if not base or not rec:
            return None, ""
        basis = f"training only, an estimate: {n} train images at the finals' medians, {base:.1f} and {rec:.1f} images/s"
        return n / base - n / rec, basis

    def payback(self, epochs: int) -> Payback:
        """When the search pays for itself over a run of ``epochs``: its bill over :meth:`saving_per_epoch`."""
        saving, basis = self.saving_per_epoch()
        return Payback(self.bill.total_s, saving, epochs, basis)

    def payback_text(self, epochs: int) -> str:
        """What the search cost and after how many epochs the saving pays it back (:class:`~speedopt.study._bill.Payback`)."""
        return self.payback(epochs).text()

    def counts_text(self) -> str:
        """``3 ok, 1 infeasible`` (``, 2 pruned part-way`` where the pruner stopped any)."""
        counts = [f"{n} {s.value}" for s, n in sorted(self.by_status.items(), key=lambda item: item[0].value)]
        return ", ".join([*counts, *([f"{self.pruned} pruned part-way"] if self.pruned else [])])

    def failed_text(self) -> str:
        """``; 1 ended early (trial 3 retried as trial 10)``, or "" when every trial ran to its end."""
        if not self.failed:
            return ""
        each = ", ".join(
            f"trial {f.number} " + (f"retried as trial {f.retried_as}" if f.retried_as is not None else "not retried")
            for f in self.failed
        )
        return f"; {len(self.failed)} ended early ({each})"


def recommended_trial(trials: Iterable[TrialRecord], finals: Finals | None) -> TrialRecord | None:
    """THE recommendation: the finals' choice, the baseline when they found no measurable gain, and
    without complete finals the search's fastest feasible trial (unconfirmed)."""
    done = list(trials)
    if finals is None or not finals.complete:
        best, base = best_trial(done), baseline_trial(done)
        return base if best is not None and base is not None and best.config == base.config else best

    choice = finals.decision().choice
    number = finals.baseline if choice is None else choice
    return next((r for r in done if r.number == number), None)


def outcome(study: optuna.Study) -> SearchOutcome:
    """Summarise a study from its stored trials."""
    done = records(study)
    by_status: dict[Status, int] = {}
    probed: dict[str, ProbedSignature] = {}
    for r in done:
        by_status[r.status] = by_status.get(r.status, 0) + 1
        if r.result.ok and r.probe_map50_95 is not None and r.signature is not None:
            probed[json.dumps(r.signature, sort_keys=True)] = ProbedSignature(
                r.signature, r.probe_map50_95, r.map_loss, r.feasibility, r.baseline_map50_95, r.map_spread, r.quality_reason
            )
    try:
        protocol: StudyProtocol | None = read_protocol(study)
    except UsageError:
        protocol = None
    return SearchOutcome(
        study_name=study.study_name,
        by_status=by_status,
        baseline=baseline_trial(done),
        best=best_trial(done),
        probes_run=sum(r.probes_run for r in done),
        probe_cache_hits=sum(r.probe_cache_hits for r in done),
        unprobed=sum(r.feasibility is Feasibility.UNPROBED for r in done),
        rejected=sum(r.feasibility is Feasibility.REJECTED for r in done),
        unknown=sum(r.feasibility is Feasibility.UNKNOWN for r in done),
        unknown_why=next((r.quality_reason for r in done if r.feasibility is Feasibility.UNKNOWN), ""),
        probed=tuple(probed.values()),
        protocol=protocol,
        trials=tuple(done),
        finals=read_finals(study),
        stopped=read_stopped(study),
        failed=failed_trials(study),
        bill=read_bill(study),
        compile=read_compile(study),
        ablation=read_ablation(study),
        pruned=sum(measured_pruned(t) for t in study.get_trials(deepcopy=False)),
    )


@dataclass(frozen=True)
class StudySummary:
    """One line of ``speedopt studies``."""

    study: str
    trials: int
    outcome: SearchOutcome
    data: str | None


def list_studies(storage_url: str | None) -> list[StudySummary]:
    """Every study in the storage (the probe cache left out) with its outcome."""
    import optuna

    rows = []
    with storage_errors(storage_url):
        storage = open_storage(storage_url)
        for name in study_names(storage):
            study = optuna.load_study(study_name=name, storage=storage)
            result = outcome(study)
            data = result.protocol.data if result.protocol else study.user_attrs.get(DATA)
            rows.append(StudySummary(name, len(study.trials), result, data))
    return rows
