"""The report's figures, drawn from a trial table."""

import numpy as np
import pandas as pd
from PIL import Image

from speedopt.reporting import _figures as figures

GREY = np.array([0x7F, 0x7F, 0x7F])  # matplotlib's tab:gray


def _grey_pixels(path):
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(int)
    return int((np.abs(rgb - GREY).sum(axis=2) < 12).sum())


def test_a_trial_off_the_searched_space_is_drawn_apart_in_the_knobs_figure(tmp_path):
    table = pd.DataFrame({
        "number": [0, 1, 2], "status": ["ok"] * 3, "images_per_s": [7.0, 21.0, 22.0], "ci_rel": [0.05, 0.04, 0.04],
        "config_cache": ["none", "ram", "disk"], "config_batch": [4, 4, 4],
    })
    plain = figures.knobs(table, ["batch", "cache"], tmp_path / "plain.png")
    apart = figures.knobs(table, ["batch", "cache"], tmp_path / "apart.png", outside=frozenset({0}))
    assert plain is not None and apart is not None
    # the baseline on another model: grey crosses and a legend (the plain figure's grey is antialiased text)
    assert _grey_pixels(apart) > 1.8 * _grey_pixels(plain)
