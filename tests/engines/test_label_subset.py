"""Taking a subset's labels from a full split's cache: what both engines share (no trainer imported)."""

import os

from speedopt.engines import SplitLabels
from speedopt.engines._common import built_cache, built_split, subset_entries, trainer_paths


def test_subset_entries_come_in_the_subsets_order():
    full = {"/i/a.jpg": "A", "/i/b.jpg": "B", "/i/c.jpg": "C"}
    assert subset_entries(full, ["/i/c.jpg", "/i/a.jpg"], []) == ([("/i/c.jpg", "C"), ("/i/a.jpg", "A")], 0)


def test_an_image_the_scan_dropped_as_corrupt_is_skipped_and_counted():
    msgs = ["train: WARNING /i/x.jpg: ignoring corrupt image/label: cannot identify image file"]
    assert subset_entries({"/i/a.jpg": "A"}, ["/i/a.jpg", "/i/x.jpg"], msgs) == ([("/i/a.jpg", "A")], 1)


def test_an_image_the_cache_does_not_know_means_scan():
    assert subset_entries({"/i/a.jpg": "A"}, ["/i/a.jpg", "/i/new.jpg"], []) is None


def test_a_built_cache_is_found_by_its_real_path_or_split(tmp_path):
    (tmp_path / "labels").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "labels")
    built = SplitLabels("train", str(tmp_path / "labels" / "train.cache"), 3, 1.0, False, "h", "1")
    assert built_cache([built], link / "train.cache") == built
    assert built_cache([built], tmp_path / "labels" / "val.cache") is None
    assert built_split([built], "train") == built and built_split([built], "val") is None


def test_trainer_paths_resolve_each_folder_as_the_trainer_lists_a_resolved_split(tmp_path):
    real = tmp_path / "real" / "images"
    real.mkdir(parents=True)
    dotted = os.path.join(str(tmp_path), "other", "..", "real", "images", "a.jpg")
    assert trainer_paths([dotted]) == [str(real / "a.jpg")]
