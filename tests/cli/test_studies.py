"""`speedopt studies` and `--help`: the CLI's thin layer over the API (no trainer runs)."""

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from speedopt.cli import build_parser
from speedopt.knobs import Knobs
from speedopt.search import SearchConfig, plan
from speedopt.status import Status
from speedopt.study import Finals, schema
from speedopt.study.record_types import Repeat
from tests.conftest import run_cli


def test_studies_lists_each_study_with_its_best(demo_yaml, tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    optuna.storages.RDBStorage(url)  # an empty storage: `studies` never creates one (a typo would become one)
    empty = run_cli("studies", "--storage", url, cwd=tmp_path)
    assert empty.returncode == 0 and f"no studies in {url}" in empty.stdout
    proto = plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="listed", storage=url, direction="maximize")
    schema.write_protocol(study, proto)
    for ips, role in ((10.0, "baseline"), (15.0, None)):
        attrs = {"status": "ok", "images_per_s": ips, "config": Knobs(batch=int(ips)).to_dict(), "feasible": True, "role": role}
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=ips, user_attrs=attrs))
    rounds = [Repeat(r, t, Status.OK, ips) for r in range(3) for t, ips in ((0, 10.0), (1, 14.0 + r))]
    study.set_user_attr("finals", Finals((0, 1), 3, tuple(rounds)).to_attr())
    done = run_cli("studies", "--storage", url, cwd=tmp_path, env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "listed" in line)
    assert "15.0" in row and "1.50x (1.40-1.60, 3 rounds)" in row



@pytest.mark.parametrize(
    "command", ["demo-data", "trial", "search", "worker", "report", "best", "verify", "dashboard", "export", "import", "studies"]
)
def test_every_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, "--help"])
    assert exit_.value.code == 0 and f"usage: speedopt {command}" in capsys.readouterr().out
