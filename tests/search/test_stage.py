"""The search as a list of stages (issue 55): their order, who runs each, and which are claimed in the storage. The
stages themselves run in the slow tier (every search test); the replay (benchmarks/replay.py) runs the whole list."""

from speedopt.search._run import STAGES
from speedopt.search._stage import Stage


def test_the_stages_run_in_the_order_the_bill_names_them():
    assert [s.name for s in STAGES] == ["ranking", "trials", "finals", "compile", "ablation", "ends"]
    assert all(isinstance(s, Stage) for s in STAGES)


def test_a_worker_runs_the_trials_only_and_the_decisions_are_claimed():
    assert [s.name for s in STAGES if not s.creator_only] == ["trials"]
    assert [s.name for s in STAGES if not s.after_trials] == ["ranking", "trials"]
    # finals claim inside their own run (they resume stored rounds); compile and ablation are claimed for the stage
    assert {s.name: s.claim for s in STAGES if s.claim} == {"compile": "compile", "ablation": "ablation"}
