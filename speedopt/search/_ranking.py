"""The ranking stage: once per study, before its first trial completes, bound every config by its ceilings and enqueue
the highest first (:mod:`speedopt.search._rank`); the study keeps what it did (:func:`~speedopt.study.schema.write_ranking`)."""

from __future__ import annotations

import dataclasses
import time

from speedopt.knobs import Knobs
from speedopt.measure import Ceiling, key_of
from speedopt.search import _ceilings as ceilings_mod
from speedopt.search import _rank as rank_mod
from speedopt.search._budget import complete
from speedopt.search._claim import Claim
from speedopt.search._stage import SearchContext, Stage
from speedopt.status import Status
from speedopt.study import schema
from speedopt.study.record_types import Ranking


class RankingStage(Stage):
    name = "ranking"
    after_trials = False

    def run(self, ctx: SearchContext, claim: Claim | None) -> None:
        from optuna.trial import TrialState


        p, study, view = ctx.plan.protocol, ctx.study, ctx.view
        if schema.read_ranking(study) is not None or complete(study) or any(
            t.state == TrialState.PRUNED for t in study.get_trials(deepcopy=False)
        ):
            return
        grid = rank_mod.configs(p.space)
        jobs = len(rank_mod.representatives(grid)) if grid is not None else 0  # at most: the branch and bound runs fewer
        skip = (
            "the space is too large to enumerate its ceilings" if grid is None
            else "ceilings are measured on one GPU; this search varies gpus" if "gpus" in p.space.sampled()
            else f"the {p.engine} engine measures no ceilings" if not p.engine_spec.engine.supports_ceilings
            else rank_mod.skip_mode(p.ceiling_rank, len(grid), p.trials)
        )
        if skip is not None or grid is None:
            schema.write_ranking(study, Ranking(len(grid or ()), jobs, False, skip or ""))
            view.note(f"ceiling ranking: {skip}")
            return
        view.note(
            f"ceiling ranking: at most {jobs} ceiling jobs bound the space's {len(grid)} configs; measuring those that can "
            "change which bound is highest, before the trials"
        )
        started = time.monotonic()
        known = _bounded(ctx, grid)
        queued = [Knobs(**{**p.baseline.to_dict(), **(t.system_attrs.get("fixed_params") or t.params)}) for t in study.get_trials(deepcopy=False)]
        ranking = rank_mod.rank(grid, known, rank_mod.first_count(p.trials), skip=[p.baseline, *queued])
        ranking = dataclasses.replace(ranking, wall_s=time.monotonic() - started)
        sampled = p.space.sampled()
        for knobs, top in ranking.enqueued:
            study.enqueue_trial({k: v for k, v in knobs.to_dict().items() if k in sampled}, user_attrs={schema.ROLE: "ceiling-rank", schema.BOUND: top})
        schema.write_ranking(study, ranking)
        view.note(f"ceiling ranking: {ranking.message} ({ranking.wall_s:.0f} s of ceiling jobs)")


def _bounded(ctx: SearchContext, grid: list[Knobs]) -> dict[str, Ceiling]:
    """The grid's ceilings, branch and bound (:func:`~speedopt.search._rank.next_job`): measured one by one, each
    stored at once. Known by the key as asked: a job the trainer ran with other knobs (no workers on a CPU) stands
    for the key it was asked for; one that measured nothing ends that key's branch."""
    known = dict(schema.read_ceilings(ctx.study))
    while (job := rank_mod.next_job(grid, known)) is not None:
        kind, knobs = job
        found = ceilings_mod.ceilings_of(ctx.plan, ctx.study, knobs, ctx.view, ctx.inputs, kinds=(kind,))
        got, key = getattr(found, kind) if found is not None else None, key_of(kind, knobs)
        known[Ceiling.name_of(kind, key)] = got if got is not None else Ceiling(kind, key, Status.ERROR, "not measured")
        if got is not None:
            known[Ceiling.name_of(kind, got.key)] = got  # as run, as the study keeps it
    return known
