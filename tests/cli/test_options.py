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
