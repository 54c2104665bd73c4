"""Opening a search's study: create it (attrs, the baseline as trial 0, warm-start configs), resume it, or join it.

Two searches started at once on one storage race to create the same study: one creates it, the other
loads it and waits (:data:`SETUP_WAIT_S`) until its creator has stored the protocol and enqueued the
baseline. A resumed study must match the plan's protocol (:meth:`~speedopt.study.StudyProtocol.conflict`);
trials a killed run left behind are retried with the same knobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedopt.errors import UsageError
from speedopt.isolation import wait_until
from speedopt.quality import merge_cache
from speedopt.search._plan import SearchPlan
from speedopt.search._recovery import recover_interrupted
from speedopt.study import schema
from speedopt.study.names import check_study_name, study_names

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

#: How long a search waits for another process that is creating the same study to finish setting it up.
SETUP_WAIT_S = 10.0


def sampler(trials: int, seed: int) -> optuna.samplers.BaseSampler:
    """The study's sampler: TPE, its random start cut to a third of the budget (at least 2, at most Optuna's 10).

    With Optuna's default of 10 random trials first, a search of 6 or 8 trials never left random sampling.
    ``benchmarks/replay.py`` (50 seeds on each measured grid, 6 trials): the pick was within 5% of the best
    config in 84% of seeds on the data table and 24% on the compute one with the default, 98% and 44% with a
    start of 2 (benchmarks/RESULTS.md). ``constant_liar``: trials still running on other workers count as
    pessimistic, so workers spread out.
    """
    import optuna

    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=max(2, min(10, trials // 3)))


def _sampler(plan: SearchPlan) -> optuna.samplers.BaseSampler:
    return sampler(plan.protocol.trials, plan.seed)


def _create_or_load(plan: SearchPlan, storage: BaseStorage) -> tuple[optuna.Study, bool]:
    """The study, and whether this process created it (two searches started at once: one creates, one joins)."""
    import optuna

    from speedopt.search._prune import pruner

    if not plan.create or plan.study_name in study_names(storage):
        return optuna.load_study(study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=pruner(plan)), False
    try:
        study = optuna.create_study(
            study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=pruner(plan), direction="maximize"
        )
    except optuna.exceptions.DuplicatedStudyError:  # another process created it a moment ago
        return optuna.load_study(study_name=plan.study_name, storage=storage, sampler=_sampler(plan), pruner=pruner(plan)), False
    return study, True


def _ready(study: optuna.Study) -> bool:
    """The study's creator finished setting it up: protocol attrs stored and the baseline enqueued."""
    return schema.SPACE in study.user_attrs and any(
        t.user_attrs.get(schema.ROLE) == "baseline" for t in study.get_trials(deepcopy=False)
    )


def _wait_ready(study: optuna.Study) -> bool:
    return not wait_until(lambda: _ready(study), SETUP_WAIT_S, every_s=0.2)


def prepared_first(plan: SearchPlan) -> dict[str, object] | None:
    """The baseline on the prepared copy, as sampled params (None: the search varies no ``data``, or the baseline
    trains on the copy already, or no copy exists at its imgsz). A search that prepared a copy measures it first."""
    p = plan.protocol
    domain = p.space.sampled().get("data")
    if domain is None or "resized" not in (domain.choices or ()) or p.baseline.data == "resized":
        return None
    if not any(c.imgsz == p.baseline.imgsz for c in p.copies):
        return None
    sampled = p.space.sampled()
    return {k: v for k, v in {**p.baseline.to_dict(), "data": "resized"}.items() if k in sampled}


def _create(plan: SearchPlan, study: optuna.Study, storage: BaseStorage) -> list[str]:
    """First run of a study: the schema version and the protocol, baseline as trial 0, warm-start configs, reused probes."""
    notes = []
    study.set_metric_names([plan.protocol.objective])
    schema.write_protocol(study, plan.protocol)
    sampled = plan.protocol.space.sampled()
    baseline = {k: v for k, v in plan.protocol.baseline.to_dict().items() if k in sampled}
    study.enqueue_trial(baseline, user_attrs={schema.ROLE: "baseline"})
    copy = prepared_first(plan)
    if copy is not None:
        study.enqueue_trial(copy, user_attrs={schema.ROLE: "prepared"})
        notes.append("data=resized (the prepared copy) is measured right after the baseline: no stop rule ends the "
                     "search before the lever it prepared for is measured")
    warm = plan.protocol.warm_start
    for config in warm.configs if warm else ():
        study.enqueue_trial(
            {k: v for k, v in config.knobs.to_dict().items() if k in sampled},
            user_attrs={schema.ROLE: "warm-start", schema.SOURCE_TRIAL: config.source_trial},
            skip_if_exists=True,
        )
    if plan.warm_cache:
        notes.append(f"{merge_cache(plan.warm_cache, storage)} probe result(s) copied from the warm-start source")
    return notes


def open_study(plan: SearchPlan, storage: BaseStorage) -> tuple[optuna.Study, list[str]]:
    """Create, resume or join the study; the notes say what happened."""
    check_study_name(plan.study_name)
    study, created = _create_or_load(plan, storage)
    notes = list(plan.notes)
    if created:
        return study, notes + _create(plan, study, storage)
    ready = _wait_ready(study) if plan.create else True
    if ready:
        schema.check(study)
    if plan.create:
        why = plan.protocol.conflict(study.user_attrs, plan.study_name)
        if why:
            raise UsageError(why)
        if not ready:  # its creator stopped half-way (interrupted between the study and its baseline)
            notes += _create(plan, study, storage)
        elif study.user_attrs.get(schema.TRIALS) != plan.protocol.trials:
            study.set_user_attr(schema.TRIALS, plan.protocol.trials)
    recovered = recover_interrupted(study, storage)
    if recovered:
        notes.append(f"trial(s) {', '.join(map(str, recovered))} ended early (interrupted or killed): retried with the same knobs")
    return study, notes
