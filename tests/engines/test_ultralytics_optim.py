"""Issue 53: trials train the optimizer the user's run trains (optimizer=auto as the installed Ultralytics resolves it
for the whole run), at the cadence of the run's steady state."""

import dataclasses

import pytest

from speedopt import data as demo_data
from speedopt import engines, measure
from speedopt.engines._ultralytics_optim import RunOptimizer, resolve, run_iterations
from speedopt.knobs import Knobs
from speedopt.status import Status


def test_auto_is_resolved_by_the_installed_trainer_for_the_whole_run():
    """The trainer's own build_optimizer decides; the switch sits where it puts it (10,000 iterations in 8.4)."""
    assert run_iterations(10_000, 16, 100) == 157 * 100  # ceil(10000 / max(16, 64)) x epochs
    assert run_iterations(10_000, 128, 100) == 79 * 100  # a batch above nbs counts fewer iterations
    # 9,999, 10,000 and 10,001 iterations (ceil(images / 64) x 1 epoch)
    short, long, longer = resolve(639_936, 16, 1, 80), resolve(640_000, 16, 1, 80), resolve(640_001, 16, 1, 80)
    assert (short.name, long.name, longer.name) == ("AdamW", "AdamW", "MuSGD")
    assert longer.lr0 == 0.01 and longer.warmup_bias_lr == 0.0 and longer.iterations == 10_001
    assert short.lr0 != longer.lr0 and short.lr0 == resolve(100, 16, 1, 80).lr0  # AdamW's lr0 is fitted to the classes
    assert resolve(100, 16, 1, 2).lr0 != short.lr0


def test_the_arguments_reproduce_the_choice_in_a_run_of_any_length():
    """MuSGD and SGD: momentum is set by the trainer's warm-up, so it is not named; AdamW's beta1 is not, so it is."""
    musgd, adamw = resolve(640_001, 16, 1, 80), resolve(100, 16, 1, 80)
    assert musgd.args() == ("optimizer=MuSGD", "lr0=0.01", "warmup_bias_lr=0")
    assert adamw.args()[0] == "optimizer=AdamW" and adamw.args()[-1] == "momentum=0.9"
    assert RunOptimizer.from_dict(musgd.to_dict()) == musgd
    assert "10,001 iterations" in musgd.text()


def test_only_the_ultralytics_engine_resolves_an_optimizer():
    assert engines.get("ultralytics").optimizer_args(640_001, 16, 1, 80)[0] == "optimizer=MuSGD"
    assert engines.get("yolov5").optimizer_args(640_001, 16, 1, 80) == ()  # train.py trains SGD, whatever the length


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(demo_data.generate(tmp_path_factory.mktemp("optim") / "tiny", demo_data.DemoSpec(train=64, val=4, width=64, height=48)))


@pytest.mark.slow
def test_a_trial_trains_the_runs_optimizer_at_its_steady_cadence(tiny):
    """64 images at batch 8: a 20,000-epoch run passes 10,000 iterations (MuSGD), a 10-epoch one does not (AdamW). In
    both, the trainer's warm-up ends inside the trial's, so the window steps every nbs/batch = 8 batches and holds
    whole cycles: exactly steps / 8 optimizer steps (inside the warm-up ramp it would step every 1-7)."""
    knobs = Knobs(model="yolov5n", imgsz=64, batch=8, workers=0)
    options = measure.TrialOptions(device="cpu", steps=10, warmup=5, max_steps=30)
    for epochs, name in ((20_000, "MuSGD"), (10, "AdamW")):
        result = measure.run_trial(measure.make_request(tiny, knobs, options, epochs=epochs))
        assert result.status is Status.OK, result.message + result.log_tail
        assert result.optimizer == name and result.optimizer_args[0] == f"optimizer={name}"
        assert result.accumulate == 8 and result.steps % 8 == 0
        assert result.optimizer_steps == result.steps // 8
        assert result.optimizer_step_s is not None and result.optimizer_step_s > 0
    named = dataclasses.replace(measure.make_request(tiny, knobs, options, epochs=20_000), optimizer="SGD")
    sgd = measure.run_trial(named)  # a run that names its optimizer trains it, whatever its length
    assert sgd.ok and sgd.optimizer == "SGD", sgd.message + sgd.log_tail


@pytest.mark.slow
def test_a_probe_trains_the_optimizer_of_the_run_it_is_a_miniature_of(tiny):
    """A 1-epoch probe on a quarter of 64 images would resolve AdamW for itself; as a miniature of a 20,000-epoch run on
    the 64 it trains MuSGD, the run's."""
    from speedopt.offline import cache_dir

    common = dict(engine="ultralytics", yolov5_dir=None, data_yaml=tiny, device="cpu", timeout_s=300, epochs=1,
                  fraction=0.25, knobs=Knobs(model="yolov5n", imgsz=64, batch=8, workers=0, amp=False),
                  cache_dir=str(cache_dir()))
    own = measure.run_job(measure.ProbeJob(**common), "test")
    run = measure.run_job(measure.ProbeJob(**common, run_epochs=20_000, run_images=64), "test")
    assert own.ok and run.ok, (own.message, own.log_tail, run.message, run.log_tail)
    assert (own.scores().optimizer, run.scores().optimizer) == ("AdamW", "MuSGD")
