"""Workers joining a study: refused on another kind of machine; two workers share a PostgreSQL study."""

import itertools
import os
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from speedopt.study import flat_attrs
from tests.conftest import EVERY_CONFIG, run_cli

PG = os.environ.get("SPEEDOPT_TEST_POSTGRES")  # set by .ci/run, which starts a real server on loopback


def _seed_study(demo_yaml, url, name, cwd, trials=1):
    done = run_cli(
        "search", "--data", str(demo_yaml), "--trials", str(trials), "--storage", url, "--study", name,
        "--quality", "off", "--baseline", "model=yolov5n imgsz=128 batch=4 workers=0", "--steps", "3", "--max-steps", "3",
        "--warmup", "1", "--device", "cpu", "--no-report", *EVERY_CONFIG, cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return optuna.load_study(study_name=name, storage=url)


@pytest.mark.slow
def test_worker_refuses_a_study_of_another_kind_of_machine(small_study, tmp_path):
    _, source, small = small_study  # a real search's study, copied: the refusal reads only its attrs
    url = f"sqlite:///{tmp_path}/w.db"
    optuna.copy_study(from_study_name=small, from_storage=source, to_storage=url, to_study_name="other-machine")
    study = optuna.load_study(study_name="other-machine", storage=url)
    before = len(study.trials)
    machine = study.user_attrs["machine"]
    machine["key"]["gpus"] = ["NVIDIA H200"]
    study.set_user_attr("machine", machine)
    done = run_cli("worker", "--storage", url, "--study", "other-machine", cwd=tmp_path)
    assert done.returncode == 2
    assert "refusing to join" in done.stderr and "GPU" in done.stderr and "Traceback" not in done.stderr
    assert len(study.trials) == before  # nothing ran


@pytest.mark.slow
@pytest.mark.skipif(not PG, reason="no PostgreSQL server: .ci/run starts one and sets SPEEDOPT_TEST_POSTGRES")
def test_two_workers_share_one_postgres_study(demo_yaml, tmp_path):
    name = f"pg-{os.getpid()}"
    study = _seed_study(demo_yaml, PG, name, tmp_path)
    # Quality off on CPU leaves one knob (cache: none, ram, disk): three configs, so three trials. A
    # larger target would count on two workers measuring one config at the same moment.
    study.set_user_attr("trials", 3)
    procs = [
        subprocess.Popen([sys.executable, "-m", "speedopt", "worker", "--storage", PG, "--study", name],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    trials = optuna.load_study(study_name=name, storage=PG).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3
    assert not [t for t in trials if t.state in (TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING)]
    by_worker = {}
    for t in complete[1:]:
        by_worker.setdefault(t.user_attrs["worker"]["pid"], []).append(t.number)
    assert sorted(by_worker) == sorted(p.pid for p in procs), by_worker  # both workers measured trials
    spans = sorted((flat_attrs(t.user_attrs)["measure_started_at"], flat_attrs(t.user_attrs)["measure_ended_at"]) for t in complete)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start  # the host lock kept their measurements apart
    print({pid: len(n) for pid, n in by_worker.items()})
