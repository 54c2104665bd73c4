"""`speedopt verify` runs the real command in a temporary folder: it gets data.yaml resolved as the user's run reads it."""

import shutil

import optuna
import yaml
from optuna.trial import TrialState, create_trial

from speedopt.knobs import Knobs
from speedopt.reporting import recommend
from speedopt.reporting._trainer_run import launch
from speedopt.search import SearchConfig, plan
from speedopt.study import schema


def test_verify_hands_the_trainer_a_resolved_data_yaml(demo_yaml, tmp_path, monkeypatch):
    """A data.yaml with ``path:`` relative to the working directory: the run's temporary folder would
    resolve it elsewhere (and its private settings' datasets_dir too); the launched command reads an
    absolute copy without ``download:``, while the command shown stays the user's."""
    shutil.copytree(demo_yaml.parent, tmp_path / "sets" / "shapes")
    (tmp_path / "cfg").mkdir()
    text = yaml.safe_load(demo_yaml.read_text()) | {"path": "sets/shapes", "download": "https://example.com/x.zip"}
    (tmp_path / "cfg" / "data.yaml").write_text(yaml.safe_dump(text))
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path}/s.db"
    proto = plan(SearchConfig(data="cfg/data.yaml", device="cpu", quality="off", storage=url)).protocol
    study = optuna.create_study(study_name="v", storage=url, direction="maximize")
    schema.write_protocol(study, proto)
    fast = Knobs(model="yolov5n", imgsz=96, batch=8, workers=0, amp=False)
    attrs = {"status": "ok", "images_per_s": 30.0, "config": fast.to_dict(), "feasible": True}
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=30.0, user_attrs=attrs))
    work = tmp_path / "work"
    work.mkdir()
    started = launch(recommend(study), 1, None, work)
    data = [w for w in started.argv if w.startswith("data=")]
    assert data == [f"data={work / 'data.yaml'}"]
    given = yaml.safe_load((work / "data.yaml").read_text())
    root = tmp_path / "sets" / "shapes"
    assert given["path"] == str(root) and given["train"] == str(root / "images" / "train") and "download" not in given
    assert "data=" in started.shown and str(work) not in started.shown
