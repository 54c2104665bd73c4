"""Faulty datasets: a symlink loop in an image folder, class names with gaps, images and labels the
trainer's own label check drops, a sparse file among the images.

Each case builds the damaged dataset itself and runs the real CLI (or the real listing the CLI runs); the
cases that start a trainer or a job are ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedopt import data as sdata
from speedopt import doctor
from tests.conftest import EVERY_CONFIG, TINY
from tests.faults.conftest import Faults, one_line_error

# The cheapest real trial: 3 batches of 4 at 64 px (a 16-image set then trains on a leading subset of 12).
TWO_STEPS = ["--model", "yolov5n", "--imgsz", "64", "--batch", "4", "--steps", "2", "--max-steps", "2", "--warmup", "1",
             "--device", "cpu"]
TINY_SEARCH = ["--quality", "off", "--trials", "1", "--repeats", "0", "--steps", "2", "--max-steps", "2", "--warmup", "1",
               "--device", "cpu", "--fix", "model=yolov5n", "--fix", "imgsz=64", "--fix", "batch=4", *EVERY_CONFIG]


# --- a symlink loop in the images folder -----------------------------------------------------------------


def _looped(faults: Faults, train: int = 16) -> Path:
    """A dataset whose train folder holds ``loopdir -> ../train``: a link back into the tree."""
    data = faults.dataset(train=train)
    (data.parent / "images" / "train" / "loopdir").symlink_to("../train")
    return data


def test_listing_does_not_follow_a_link_back_into_the_tree(faults: Faults, tmp_path: Path) -> None:
    """A link back into the folder (or above it) is not followed; a link to a folder outside is: the
    trainer lists that one too."""
    data = _looped(faults)
    train = data.parent / "images" / "train"
    (train / "up").symlink_to("../..")  # the dataset root: images/val would come in through it
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "extra.jpg").write_bytes((train / "train_00000.jpg").read_bytes())
    (train / "more").symlink_to(outside)
    listed = sdata.load(data).train_images  # what prepare, doctor and the search's plan list
    assert len(listed) == 17, [str(p) for p in listed if "loopdir" in str(p) or "/up/" in str(p)][:3]
    assert train / "more" / "extra.jpg" in listed and listed == tuple(sorted(listed, key=str))
    assert sdata.list_images(train) == listed  # the one listing, which a trial's trainer gets too


@pytest.mark.slow
def test_a_trial_on_a_folder_with_a_symlink_loop_trains_the_real_images(faults: Faults) -> None:
    data = _looped(faults)
    done = faults.run("trial", "--data", str(data), *TWO_STEPS, "--json", timeout=300)
    result = json.loads(done.stdout)
    assert result["status"] == "ok", result["message"]
    assert (result["images_used"], result["images_total"]) == (12, 16)


# --- names with gaps -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["trial", "search"])
def test_names_with_gaps_are_refused_at_plan_time(faults: Faults, command: str) -> None:
    data = faults.dataset()
    data.write_text(data.read_text().split("names:")[0] + "names: {0: a, 2: c, 5: f}\n")
    args = TINY if command == "trial" else ["--device", "cpu", "--quality", "off"]
    line = one_line_error(faults.run(command, "--data", str(data), *args, timeout=60), "names", "0, 1, 2", str(data))
    assert "missing 1, 3, 4" in line, line
    faults.unchanged()


# --- a sparse file among the images ------------------------------------------------------------------------


def test_doctor_reads_real_images_not_a_sparse_file(faults: Faults) -> None:
    """A 2 GB sparse "image" (holes, no data) sorts first; the read test samples the real images around it
    and names what it sampled and what it left out. (doctor's own read check on the dataset's listing: the
    whole ``speedopt doctor`` imports torch for its GPU checks, 3 s here.)"""
    data = faults.dataset()
    big = data.parent / "images" / "train" / "a_big.jpg"
    with open(big, "wb") as handle:
        handle.truncate(2 << 30)
    detail = doctor.read_speed(sdata.load(data).train_images, budget_s=0.4).detail
    assert "over 8 images" in detail and "train_00000.jpg" in detail, detail  # 16 real images: 8 in order, 8 at random
    assert "a_big.jpg" in detail and "sparse" in detail, detail


# --- images and labels the trainer's label check drops ------------------------------------------------------


def _badly_labelled(faults: Faults) -> Path:
    """25 train / 5 val images of which the trainer's label check (``verify_image_label``) drops 7 train
    images and 1 val image: a truncated JPEG, 1x1 images (it wants more than 9 px a side), and labels with
    out-of-range or negative coordinates, four columns, a class past ``names`` or a fractional class."""
    from PIL import Image

    data = faults.dataset(train=25, val=5)
    train = sorted((data.parent / "images" / "train").iterdir())
    val = sorted((data.parent / "images" / "val").iterdir())
    train[0].write_bytes(train[0].read_bytes()[:60])
    Image.new("RGB", (1, 1)).save(train[1])
    Image.new("RGB", (1, 1)).save(val[0])
    rows = ["0 1.5 0.5 0.2 0.2", "0 0.5 0.5 0.2", "0 -0.5 0.5 0.2 0.2", "9 0.5 0.5 0.2 0.2", "0.5 0.5 0.5 0.2 0.2"]
    for image, row in zip(train[2:], rows):
        sdata.label_path(image).write_text(row + "\n")
    return data


@pytest.mark.slow
def test_the_search_reports_and_records_what_the_trainers_label_check_drops(faults: Faults) -> None:
    import optuna

    from speedopt.study import records

    data = _badly_labelled(faults)
    url = f"sqlite:///{faults.root}/dropped.db"
    done = faults.run("search", "--data", str(data), "--storage", url, "--study", "dropped", "--no-report", *TINY_SEARCH,
                      timeout=600, env={"TORCHINDUCTOR_CACHE_DIR": str(faults.root / "inductor")})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "drops 7 of 25 train and 1 of 5 val images as corrupt" in said and "trains on 18 train images" in said, said[-3000:]
    assert "unreadable train image" not in said  # the size sample's count (1) was no count of the trainer's
    [record] = records(optuna.load_study(study_name="dropped", storage=url))
    assert record.result.images_total == 18, record.result.images_total


def _leading_images_dropped(faults: Faults, dropped: int = 40) -> Path:
    """The demo set plus ``dropped`` labelled 2x2 JPEGs that sort first: the trainer's label check drops every one
    (it wants more than 9 px a side), so a leading subset of the listing holds no image the trainer trains on."""
    from PIL import Image

    data = faults.dataset(train=16, val=4)
    train = data.parent / "images" / "train"
    for i in range(dropped):
        image = train / f"0000-tiny-{i:04d}.jpg"
        Image.new("RGB", (2, 2)).save(image)
        sdata.label_path(image).write_text("0 0.5 0.5 0.2 0.2\n")
    return data


@pytest.mark.slow
def test_a_trials_subset_is_drawn_from_the_images_the_label_check_keeps(faults: Faults) -> None:
    """Issue 54, item 6: the subset was the leading images of the listing, all of them dropped here, and every trial
    ended `No valid images found` (the search: "no feasible trial") on a set the trainer trains on."""
    import optuna

    from speedopt.study import records

    data = _leading_images_dropped(faults)
    trial = faults.run("trial", "--data", str(data), "--json", *TWO_STEPS, timeout=300)
    assert trial.returncode == 0, (trial.stdout + trial.stderr)[-3000:]
    assert json.loads(trial.stdout)["status"] == "ok"
    url = f"sqlite:///{faults.root}/subset.db"
    done = faults.run("search", "--data", str(data), "--storage", url, "--study", "subset", "--no-report", *TINY_SEARCH,
                      timeout=600, env={"TORCHINDUCTOR_CACHE_DIR": str(faults.root / "inductor")})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "drops 40 of 56 train" in said, said[-3000:]
    [record] = records(optuna.load_study(study_name="subset", storage=url))
    assert record.result.ok and record.result.images_used == 12  # 3 batches of 4, all from the 16 it keeps
