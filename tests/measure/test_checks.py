"""The input checks a trial and a search share: numbers that are finite and positive, and a disk
cache only where the dataset folder can be written."""

import math
import os
import shutil
import subprocess

import pytest

from speedopt import data as demo_data
from speedopt import defaults, measure
from speedopt.errors import UsageError
from speedopt.knobs import Knobs


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0.0, -1.0])
def test_durations_and_sizes_must_be_finite_and_positive(value):
    with pytest.raises(UsageError, match="--x must be a positive, finite number of seconds"):
        measure.positive(value, "--x", "seconds")
    with pytest.raises(UsageError, match="--timeout"):
        measure.TrialOptions(timeout_s=value, engine="standin").check()
    with pytest.raises(UsageError, match="--trial-timeout"):
        measure.TrialOptions(timeout_s=value, engine="standin").check("--trial-timeout")
    with pytest.raises(UsageError, match="--ram-limit"):
        measure.TrialOptions(ram_limit_gb=value, engine="standin").check()


def test_good_values_pass():
    assert measure.positive(1.5, "--x", "s") == 1.5
    options = measure.TrialOptions(steps=2, warmup=1, timeout_s=30.0, engine="standin", ram_limit_gb=0.5)
    assert options.check().name == "standin"
    assert options.ram_limit_bytes == 2**29 and options.most_steps == 2 * defaults.MAX_STEPS_FACTOR


@pytest.mark.parametrize(
    ("change", "says"),
    [({"steps": 1}, "--steps must be at least 2"), ({"max_steps": 1}, "--max-steps must be at least --steps"),
     ({"warmup": 0}, "--warmup must be at least 1"), ({"engine": "nope"}, "unknown engine 'nope'")],
)
def test_trial_options_refuse_each_bad_value_in_one_line(change, says):
    with pytest.raises(UsageError, match=says):
        measure.TrialOptions(**{"engine": "standin", **change}).check()


@pytest.fixture
def read_only(tmp_path):
    """Make a folder read-only, even for root (chattr +i); undone afterwards."""
    frozen = []

    def freeze(folder):
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
                pytest.skip("chattr +i is not available: a read-only folder cannot be simulated as root")
        else:
            folder.chmod(0o555)
        frozen.append(folder)

    yield freeze
    for folder in frozen:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)])
        else:
            folder.chmod(0o755)


def test_disk_cache_on_a_folder_that_cannot_be_written_is_infeasible_before_it_runs(tmp_path, read_only):
    yaml = demo_data.generate(tmp_path / "shapes", demo_data.DemoSpec(train=8, val=2, width=64, height=48, seed=1))
    knobs = Knobs(model="yolov5n", imgsz=64, batch=4, workers=0, cache="disk")
    assert measure.make_request(str(yaml), knobs, measure.TrialOptions(device="cpu", steps=2, warmup=1)).infeasible is None
    read_only(yaml.parent / "images" / "val")
    request = measure.make_request(str(yaml), knobs, measure.TrialOptions(device="cpu", steps=2, warmup=1))
    assert "not writable" in request.infeasible and str(yaml.parent / "images" / "val") in request.infeasible
    assert measure.make_request(str(yaml), Knobs(**{**knobs.to_dict(), "cache": "none"}),
        measure.TrialOptions(device="cpu", steps=2, warmup=1)).infeasible is None
