"""`speedopt doctor` on this machine, and each check forced to its warn or fail line."""

import json
from collections import namedtuple

import pytest

from speedopt import data as demo_data
from speedopt import doctor, machine
from speedopt.doctor import _gpu
from speedopt.knobs import Knobs
from tests.conftest import run_cli

Part = namedtuple("Part", "device mountpoint fstype opts")
CHECKS = ["torch", "gpus", "device", "cores", "affinity", "shm", "dataset", "ram", "shm-cache", "filesystem", "read", "decode",
          "loggers"]


def test_every_check_runs_here_without_a_traceback(demo_yaml):
    done = run_cli("doctor", "--data", str(demo_yaml), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [c["check"] for c in found["checks"]] == CHECKS
    assert {c["level"] for c in found["checks"]} <= {"ok", "warn"} and found["worst"] == "warn"  # no GPU here: warn
    read = next(c for c in found["checks"] if c["check"] == "read")
    assert "sequential" in read["detail"] and "MB/s" in read["detail"]
    lines = run_cli("doctor", "--data", str(demo_yaml), "--read-seconds", "1")
    assert lines.returncode == 0 and "Traceback" not in lines.stderr
    assert lines.stdout.splitlines()[-1].startswith("13 checks: 0 failed")
    assert "ok   affinity: " in lines.stdout and "shm-cache: /dev/shm" in lines.stdout


def test_a_missing_dataset_is_a_fail_line_and_exit_1(tmp_path):
    done = run_cli("doctor", "--data", str(tmp_path / "nowhere" / "data.yaml"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "fail dataset:" in done.stdout and "fail filesystem:" in done.stdout


def test_a_gpu_that_is_not_there_fails_the_doctor_and_stops_the_search(demo_yaml, tmp_path):
    assert machine.cuda_device_count() == 0  # this machine: no CUDA
    done = run_cli("doctor", "--device", "0")
    assert done.returncode == 1 and "fail device: --device 0: CUDA device 0 does not exist" in done.stdout
    search = run_cli("search", "--data", str(demo_yaml), "--device", "0", "--storage", f"sqlite:///{tmp_path / 's.db'}")
    assert search.returncode == 2 and "speedopt doctor: fail device: --device 0" in search.stderr
    assert "Traceback" not in search.stderr and not (tmp_path / "s.db").exists()


def test_gpus_the_driver_sees_but_torch_cannot_use_are_fatal_unless_cpu_is_asked(monkeypatch):
    # Mocked, because it cannot exist here: an NVIDIA driver (NVML) with a GPU, and torch without CUDA.
    monkeypatch.setattr(machine, "nvml_gpus", lambda: ([machine.Gpu("NVIDIA H100", 81559)], "535.104", "12.2"))
    found = _gpu.torch_build()
    assert found.level is doctor.Level.FAIL and "quietly train on the CPU" in found.detail and "CUDA 12.2" in found.fix
    assert _gpu.fatal(None) is not None and "--device cpu" in _gpu.fatal(None).fix
    assert _gpu.fatal("cpu") is None
    assert _gpu.gpus_visible().level is doctor.Level.OK


def test_a_network_mount_and_an_overlay_are_warned_about(tmp_path):
    local = [Part("/dev/vda", "/", "ext4", "rw")]
    assert doctor.filesystem(tmp_path, local).level is doctor.Level.OK
    nfs = [*local, Part("server:/export", str(tmp_path), "nfs4", "rw")]
    inner = tmp_path / "images"
    inner.mkdir()
    found = doctor.filesystem(inner, nfs)  # under the mount: the longest mountpoint holding it wins
    assert found.level is doctor.Level.WARN and "nfs4" in found.detail and "local disk" in found.fix
    overlay = [Part("overlay", "/", "overlay", "rw")]
    assert "container" in doctor.filesystem(tmp_path, overlay).detail
    assert doctor.mount_of(tmp_path, nfs).fstype == "nfs4"


def test_shared_memory_too_small_for_the_workers_fails(tmp_path):
    huge = Knobs(workers=64, batch=4096, imgsz=8192)
    assert doctor.shm_need(huge, 4) > 2**40
    found = doctor.shm(huge, 4, tmp_path)  # whatever the disk under tmp_path, it is not 26 TiB
    assert found.level is doctor.Level.FAIL and "bus error" in found.detail and "--shm-size" in found.fix
    assert doctor.shm(Knobs(workers=0), 4, tmp_path).level is doctor.Level.OK
    assert doctor.shm(Knobs(), 4, tmp_path / "no-shm").level is doctor.Level.WARN
    done = run_cli("doctor", "--workers", "64", "--batch", "4096", "--imgsz", "8192")
    assert done.returncode == 1 and "fail shm:" in done.stdout


def test_read_speed_measures_both_orders(demo_yaml):
    images = sorted((demo_yaml.parent / "images" / "train").glob("*"))
    found = doctor.read_speed(images, budget_s=1.0)
    assert "sequential" in found.detail and "random" in found.detail
    assert doctor.read_speed([]).level is doctor.Level.WARN


def test_images_far_larger_than_imgsz_are_decode_waste(tmp_path):
    yaml = demo_data.generate(tmp_path / "big", demo_data.DemoSpec(train=4, val=2, width=1280, height=960, seed=2))
    done = run_cli("doctor", "--data", str(yaml), "--imgsz", "320", "--json", "--read-seconds", "0.5")
    decode = next(c for c in json.loads(done.stdout)["checks"] if c["check"] == "decode")
    assert decode["level"] == "warn" and "16.0x the pixels" in decode["detail"] and "speedopt prepare" in decode["fix"]


@pytest.mark.parametrize("bad", [["--workers", "-1"], ["--imgsz", "0"]])
def test_bad_knobs_are_one_line_and_exit_2(bad):
    done = run_cli("doctor", *bad)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_doctor_help_answers():
    done = run_cli("doctor", "--help")
    assert done.returncode == 0 and "bus error" in done.stdout


def test_a_short_dev_shm_costs_each_loader_worker_a_copy_of_the_ram_cache():
    """Issue 46: Ultralytics shares the RAM cache with spawned workers through /dev/shm; short, each gets a copy."""
    docker = doctor.ShmUsage(total=64 * 2**20, free=60 * 2**20)  # Docker's default /dev/shm (sizes injected)
    cache = 3 * 2**30
    short = doctor.shm_cache(cache, Knobs(workers=8), docker)
    assert short.level is doctor.Level.WARN and "60 MiB free of 64 MiB" in short.detail and "3.0 GiB" in short.detail
    assert "its own copy" in short.detail and "24.0 GiB more RAM" in short.detail  # 8 workers x 3 GiB
    assert "--shm-size=6g" in short.fix and "cache=disk" in short.fix
    roomy = doctor.ShmUsage(total=32 * 2**30, free=30 * 2**30)
    assert doctor.shm_cache(cache, Knobs(workers=8), roomy).level is doctor.Level.OK
    assert doctor.shm_cache(cache, Knobs(workers=0), docker).level is doctor.Level.OK  # no worker, no copy
    unchecked = doctor.shm_cache(None, Knobs(), docker)  # without --data: only reported
    assert unchecked.level is doctor.Level.OK and "give --data" in unchecked.detail
    absent = doctor.shm_cache(cache, Knobs(), None)
    assert "no /dev/shm here" in absent.detail and "not checked" in absent.detail
    assert absent.to_dict()["check"] == "shm-cache"


def test_a_loader_worker_confined_to_fewer_cpus_is_a_warning():
    """Issue 46: a loader worker inherits the parent's affinity (the CPU sets injected)."""
    pinned = doctor.affinity(1, frozenset({0, 1, 2, 3, 8}), 16)
    assert pinned.level is doctor.Level.WARN and "5 of 16 CPUs (0-3,8)" in pinned.detail and "time-share" in pinned.detail
    assert "workers=5" in pinned.fix and "taskset" in pinned.fix
    assert "workers=2" in doctor.affinity(2, frozenset(range(4)), 16).fix  # per GPU: each rank starts its own workers
    assert doctor.affinity(1, frozenset(range(16)), 16).level is doctor.Level.OK
    unknown = doctor.affinity(1, None, 16)  # macOS, Windows: no os.sched_getaffinity
    assert unknown.level is doctor.Level.OK and "sched_getaffinity does not exist" in unknown.detail
