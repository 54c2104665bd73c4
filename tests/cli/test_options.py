"""Options every command shares: the engine choice offers the user's trainers only."""

from __future__ import annotations

import pytest

from speedopt.cli import build_parser


@pytest.mark.parametrize("command", ["trial", "search", "ceilings"])
def test_help_offers_the_trainers_and_not_the_test_double(capsys, command):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = capsys.readouterr().out
    assert "{ultralytics,yolov5}" in text and "standin" not in text


def test_the_stand_in_is_reachable_for_tests_and_a_wrong_name_lists_only_the_trainers(capsys):
    assert build_parser().parse_args(["trial", "--data", "d.yaml", "--engine", "standin"]).engine == "standin"
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["trial", "--data", "d.yaml", "--engine", "nope"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "'nope'" in err and "ultralytics, yolov5" in err and "standin" not in err


@pytest.mark.parametrize(("command", "timeout"), [("trial", "--timeout"), ("ceilings", "--timeout"), ("search", "--trial-timeout")])
def test_the_measurement_options_are_one_trial_options_value(command, timeout):
    """What the CLI's measurement group reads is the TrialOptions the Python API and a search take, name for name."""
    import dataclasses
    import inspect

    import speedopt
    from speedopt.cli._options import trial_options
    from speedopt.measure import TrialOptions

    flags = ["--steps", "5", "--max-steps", "9", "--warmup", "2", "--device", "cpu", timeout, "30", "--ram-limit", "1.5",
             "--engine", "standin"]
    args = build_parser().parse_args([command, "--data", "d.yaml", *flags])
    given = args.trial_timeout if command == "search" else args.timeout
    assert trial_options(args, given) == TrialOptions(5, 9, 2, 30.0, "cpu", "standin", None, 1.5)
    names = {f.name for f in dataclasses.fields(TrialOptions)}
    for api in (speedopt.trial, speedopt.ceilings):
        assert names <= set(inspect.signature(api).parameters)
    config = speedopt.SearchConfig(data="d.yaml", steps=5, max_steps=9, warmup=2, device="cpu", engine="standin",
                                   trial_timeout_s=30.0, ram_limit_gb=1.5)
    assert config.trial == TrialOptions(5, 9, 2, 30.0, "cpu", "standin", None, 1.5)
