"""Hostile and faulty input: hostile study names, hostile, corrupt or huge YAML, bad images, relative
dataset paths, unbounded ranges, read-only folders, busy ports and bad hosts.

Each case runs the real CLI and checks what the user sees (one line naming the problem and the fix,
exit 2, no traceback, or a run that works) and what it leaves (nothing outside its folder, nothing in
the temp folder). Cases that run a real trainer, or need the session's small study, are ``slow``.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import optuna
import pytest

from tests.conftest import EVERY_CONFIG, TINY, free_port
from tests.faults.conftest import Faults, freeze, no_traceback, one_line_error

# Trials in these cases: the smallest real search speedopt can run (the baseline pinned to it too).
TINY_SEARCH = [
    "--quality", "off", "--trials", "1", "--repeats", "0", "--steps", "3", "--max-steps", "3", "--warmup", "1", "--device", "cpu",
    "--fix", "model=yolov5n", "--fix", "imgsz=64", "--fix", "batch=4", *EVERY_CONFIG,
]


def _inductor(faults: Faults) -> dict[str, str]:
    """torch's inductor keeps a cache in the temp folder when a trainer runs; that is not what these
    cases are about, so it goes beside the sandbox instead."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(faults.root / "inductor")}


BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")),
    ]
) + "\n"


def _yaml_text(data_yaml: Path) -> str:
    return data_yaml.read_text()


def _rewrite(data_yaml: Path, text: str) -> Path:
    data_yaml.write_text(text)
    return data_yaml


# --- hostile and huge YAML ----------------------------------------------------------------------------


def test_billion_laughs_data_yaml_is_refused_in_one_line(faults: Faults) -> None:
    data = faults.dataset()
    root = data.parent
    _rewrite(data, BILLION_LAUGHS + f"path: {root}\ntrain: images/train\nval: images/val\nnames: *i\n")
    assert data.stat().st_size < 600  # a few hundred bytes that would expand to gigabytes
    faults.watch(root)
    one_line_error(faults.run("trial", "--data", str(data), *TINY, timeout=60), "alias", str(data))
    faults.unchanged()


def test_billion_laughs_space_file_is_refused_in_one_line(faults: Faults) -> None:
    data = faults.dataset()
    space = faults.work / "space.yaml"
    space.write_text(BILLION_LAUGHS + "batch: *i\n")
    one_line_error(faults.run("search", "--data", str(data), "--space", str(space), "--device", "cpu", timeout=60),
                   "alias", "space file")
    faults.unchanged()


def test_yaml_over_the_size_cap_is_refused(faults: Faults) -> None:
    """A 2 MiB data.yaml (a comment padding a valid file) is refused before it is parsed."""
    data = faults.dataset()
    _rewrite(data, _yaml_text(data) + "#" + "x" * (2 << 20) + "\n")
    # --fix lr=... is checked after the dataset: without the cap the error would be about lr instead.
    done = faults.run("search", "--data", str(data), "--fix", "lr=0.1", "--device", "cpu", timeout=60)
    one_line_error(done, "data.yaml", "KiB")
    faults.unchanged()


def test_deeply_nested_yaml_is_one_line(faults: Faults) -> None:
    data = faults.dataset()
    _rewrite(data, _yaml_text(data) + "deep: " + "[" * 50_000 + "]" * 50_000 + "\n")
    one_line_error(faults.run("trial", "--data", str(data), *TINY, timeout=60), "nests")
    faults.unchanged()


def test_names_with_mixed_keys_is_one_line(faults: Faults) -> None:
    data = faults.dataset()
    _rewrite(data, _yaml_text(data).split("names:")[0] + "names: {0: circle, x: square}\n")
    one_line_error(faults.run("trial", "--data", str(data), *TINY, timeout=60), "names", "integers")
    faults.unchanged()


@pytest.mark.parametrize("key", ["path", "train"])
def test_nul_byte_in_a_dataset_path_is_one_line(faults: Faults, key: str) -> None:
    data = faults.dataset()
    text = _yaml_text(data)
    if key == "path":
        text = re.sub(r"^path: .*$", lambda _: 'path: "da\\0ta"', text, flags=re.M)
    else:
        text = text.replace("train: images/train", 'train: "images/tr\\0ain"')
    _rewrite(data, text)
    one_line_error(faults.run("trial", "--data", str(data), *TINY, timeout=60), "NUL byte", f"'{key}'")
    faults.unchanged()


# --- unbounded ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "space, mentions",
    [
        ("workers: {low: 0, high: 100000000}", ("workers", "at most")),
        ("batch: {low: 1, high: 1000000000000}", ("batch", "at most 4096")),
        ("imgsz: [32, 1048576]", ("imgsz", "at most 8192")),
        ("imgsz: {low: 320, high: 640, step: 1}", ("imgsz", "multiple of 32")),
        ("workers: {low: 0, high: 8, step: true}", ("workers", "positive integer step")),
        ("batch: {low: 1, high: " + "9" * 5000 + "}", ("cannot read", "digits")),
        ("batch: {low: 1, high: '" + "9" * 5000 + "'}", ("batch", "integer")),
    ],
)
def test_space_ranges_are_bounded(faults: Faults, space: str, mentions: tuple[str, ...]) -> None:
    data = faults.dataset()
    file = faults.work / "space.yaml"
    file.write_text(space + "\n")
    done = faults.run("search", "--data", str(data), "--space", str(file), "--device", "cpu", timeout=60)
    line = one_line_error(done, "space.yaml", *mentions)
    assert len(line) < 400, line  # a hostile value is cut, not echoed whole
    faults.unchanged()


def _without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value."""
    if flag not in argv:
        return list(argv)
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:]


@pytest.mark.parametrize("flag, value", [("--workers", "100000000"), ("--batch", "100000"), ("--imgsz", "100000")])
def test_trial_knobs_are_bounded(faults: Faults, flag: str, value: str) -> None:
    data = faults.dataset()
    done = faults.run("trial", "--data", str(data), *_without(TINY, flag), flag, value, timeout=60)
    one_line_error(done, flag.lstrip("-"), "at most")
    faults.unchanged()


# --- bad images in the train split ---------------------------------------------------------------------


def _damage(data: Path) -> int:
    """Add a 0-byte image, a text file named .jpg and a JPEG cut before its header ends; returns 3."""
    train = data.parent / "images" / "train"
    labels = data.parent / "labels" / "train"
    good = sorted(train.glob("*.jpg"))[0]
    (train / "zero.jpg").write_bytes(b"")
    (train / "text.jpg").write_text("not an image at all\n")
    (train / "cut.jpg").write_bytes(good.read_bytes()[:12])
    for stem in ("zero", "text", "cut"):
        shutil.copyfile(labels / f"{good.stem}.txt", labels / f"{stem}.txt")
    return 3


def test_unreadable_images_do_not_break_the_ram_cache_estimate(faults: Faults) -> None:
    """cache=ram is estimated from sampled image headers: unreadable files are skipped, not a crash.
    The RAM limit is tiny, so the trial is refused as infeasible before any trainer starts."""
    data = faults.dataset()
    _damage(data)
    faults.watch(data.parent)
    done = faults.run("trial", "--data", str(data), *TINY, "--cache", "ram", "--ram-limit", "0.000001", timeout=120)
    no_traceback(done)
    everything = done.stdout + done.stderr
    assert "cannot identify" not in everything and "cache=ram needs about" in everything, everything[-2000:]
    faults.unchanged()


@pytest.mark.slow
def test_search_skips_unreadable_images_and_says_how_many(faults: Faults) -> None:
    data = faults.dataset()
    skipped = _damage(data)
    url = f"sqlite:///{faults.root}/bad-images.db"
    done = faults.run("search", "--data", str(data), "--storage", url, "--no-report", *TINY_SEARCH,
                      timeout=600, env=_inductor(faults))
    no_traceback(done)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert f"the trainer's label check drops {skipped} of 19 train images as corrupt" in done.stdout + done.stderr
    faults.unchanged()


# --- relative dataset paths, download: keys ----------------------------------------------------------------


def _relative_copy(faults: Faults) -> Path:
    """The demo set under work/sets/shapes and a data.yaml in work/cfg/ with ``path: sets/shapes``:
    relative to the working directory, as Ultralytics reads it (not to the yaml's folder)."""
    data = faults.dataset()
    shutil.move(str(data.parent), faults.work / "sets" / "shapes")
    cfg = faults.work / "cfg"
    cfg.mkdir()
    text = re.sub(r"^path: .*$", "path: sets/shapes", _yaml_text(faults.work / "sets" / "shapes" / "data.yaml"), flags=re.M)
    return _rewrite(cfg / "data.yaml", text)


@pytest.mark.slow
def test_relative_path_trains_the_files_speedopt_checked(faults: Faults) -> None:
    data = _relative_copy(faults)
    faults.watch(data)
    done = faults.run("trial", "--data", "cfg/data.yaml", *TINY, "--json", timeout=300, env=_inductor(faults))
    no_traceback(done)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["images_per_s"] > 0, result.get("message")
    faults.unchanged()


def test_download_key_never_downloads_and_leaves_nothing(faults: Faults) -> None:
    data = _relative_copy(faults)
    _rewrite(data, _yaml_text(data).replace("path: sets/shapes", "path: missing-set")
             + "download: https://example.com/missing-set.zip\n")
    faults.watch(faults.work)
    line = one_line_error(faults.run("trial", "--data", str(data), *TINY, timeout=60), "missing-set", "never downloads")
    assert "datasets_dir" in line  # it says where a relative path was looked for
    faults.unchanged()


# --- hostile study names in reports ---------------------------------------------------------------------


def _hostile_copy(small_study: tuple[Path, str, str], faults: Faults, name: str) -> str:
    """The session's small study under ``name`` in a private storage (as an imported export brings it)."""
    _, url, small = small_study
    target = f"sqlite:///{faults.root}/hostile.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.copy_study(from_study_name=small, from_storage=url, to_storage=target, to_study_name=name)
    return target


HOSTILE_NAMES = {
    "dot-dot": "../escape/x",
    "two-up": "../../escape-two",
    "absolute": "{root}/outside/abs",
    "nul": "nul\0byte/../../escape-nul",
    "long": "../" + "n" * 3000,
    "only-dots": "..",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE_NAMES))
def test_report_keeps_a_hostile_study_name_inside_reports(small_study, faults: Faults, case: str) -> None:
    name = HOSTILE_NAMES[case].format(root=faults.root)
    url = _hostile_copy(small_study, faults, name)
    chosen = [] if "\0" in name else ["--study", name]  # argv cannot hold a NUL: the only study is the default
    done = faults.run("report", "--storage", url, *chosen, timeout=600, env=_inductor(faults))
    no_traceback(done)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    reports = faults.work / "reports"
    store = faults.root / "hostile.db.artifacts"  # the dashboard's copies of the figures: named for the storage, not the study
    written = sorted(p for p in faults.root.rglob("*") if p.is_file() and p.name != "hostile.db"
                     and faults.root / "inductor" not in p.parents and store not in p.parents)
    outside = [p for p in written if reports not in p.parents]
    assert written and outside == [], outside
    assert [p.parent for p in store.rglob("*") if p.is_file()] and all(p.parent == store for p in store.rglob("*") if p.is_file())
    markdown = faults.work / done.stdout.strip().splitlines()[-1]
    assert markdown.parent == reports and markdown.is_file() and len(markdown.name) < 120, markdown
    assert markdown.with_suffix(".csv").is_file()
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", markdown.read_text())
    assert links and all((reports / link).is_file() for link in links), links
    faults.unchanged()


@pytest.mark.slow
def test_report_refuses_a_link_planted_where_it_writes(small_study, faults: Faults) -> None:
    url = _hostile_copy(small_study, faults, "planted")
    victim = faults.root / "victim.txt"
    victim.write_text("precious\n")
    (faults.work / "reports").mkdir()
    (faults.work / "reports" / "planted.md").symlink_to(victim)
    faults.watch(victim)
    one_line_error(faults.run("report", "--storage", url, "--study", "planted", timeout=300), "refusing", "outside")
    faults.unchanged()


@pytest.mark.slow
def test_search_with_a_dot_dot_study_writes_its_report_inside_reports(faults: Faults) -> None:
    data = faults.dataset()
    url = f"sqlite:///{faults.root}/search.db"
    done = faults.run("search", "--data", str(data), "--storage", url, "--study", "../escape/x", *TINY_SEARCH,
                      timeout=900, env=_inductor(faults))
    no_traceback(done)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert not (faults.work / "escape").exists()
    assert [p.name for p in (faults.work / "reports").glob("*.md")] and all(
        re.fullmatch(r"escape-x-[0-9a-f]{8}\.md", p.name) for p in (faults.work / "reports").glob("*.md"))
    faults.unchanged()


# --- read-only folders ---------------------------------------------------------------------------------


def test_demo_data_in_a_read_only_folder_is_one_line(faults: Faults) -> None:
    freeze(faults.work)
    faults.watch(faults.work)
    one_line_error(faults.run("demo-data", "--train", "2", "--val", "1", "--size", "64x48", timeout=60),
                   "demo-data PATH", "speedopt-demo")
    faults.unchanged()


@pytest.mark.slow
def test_report_in_a_read_only_folder_names_out(small_study, faults: Faults) -> None:
    url = _hostile_copy(small_study, faults, "plain")
    freeze(faults.work)
    faults.watch(faults.work)
    one_line_error(faults.run("report", "--storage", url, "--study", "plain", timeout=300), "--out", "reports")
    faults.unchanged()


@pytest.mark.slow
def test_report_with_a_read_only_reports_folder_names_out(small_study, faults: Faults) -> None:
    url = _hostile_copy(small_study, faults, "plain")
    reports = faults.work / "reports"
    reports.mkdir()
    freeze(reports)
    faults.watch(reports)
    one_line_error(faults.run("report", "--storage", url, "--study", "plain", timeout=300), "--out", "reports")
    faults.unchanged()


# --- the dashboard: ports and hosts --------------------------------------------------------------------


def _dashboard(faults: Faults, *args: str) -> subprocess.CompletedProcess:
    """The dashboard on a storage that exists (so only the address can be wrong); 60 s: it must not serve."""
    url = f"sqlite:///{faults.root}/dash.db"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="dash", storage=url)
    return faults.run("dashboard", "--storage", url, *args, timeout=60)


def test_dashboard_on_a_busy_port_is_one_line(faults: Faults) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        one_line_error(_dashboard(faults, "--port", str(port)), "in use", "--port")
    faults.unchanged()


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_dashboard_port_out_of_range_is_one_line(faults: Faults, port: str) -> None:
    one_line_error(_dashboard(faults, "--port", port), "--port", "65535")
    faults.unchanged()


@pytest.mark.parametrize("host", ["not a host", "8.8.8.8"])
def test_dashboard_bad_host_is_one_line(faults: Faults, host: str) -> None:
    one_line_error(_dashboard(faults, "--host", host, "--port", str(free_port())), "--host", "127.0.0.1")
    faults.unchanged()
