"""The sampler's memory figure: a process tree's own memory, counted once, whatever else maps the same pages."""

import os
import subprocess
import sys
import time

import psutil
import pytest

from speedopt.measure._telemetry import tree_memory

MB = 2**20
# Map a file and touch each page, so its pages are resident and file-backed, as torch's libraries are.
TOUCH = ("import mmap, sys, time\n"
         "f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
         "s = sum(m[i] for i in range(0, len(m), 4096)); print('ready', flush=True); time.sleep(60)\n")


def _start(path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", TOUCH, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_a_neighbour_mapping_the_same_pages_does_not_shrink_the_tree(tmp_path):
    path = tmp_path / "lib.bin"
    path.write_bytes(os.urandom(48 * MB))
    root = _start(path)
    try:
        alone = tree_memory(psutil.Process(root.pid))
        assert alone > 48 * MB  # the mapped pages are counted
        neighbour = _start(path)
        try:
            time.sleep(0.2)
            beside = tree_memory(psutil.Process(root.pid))
        finally:
            neighbour.kill()
            neighbour.wait()
    finally:
        root.kill()
        root.wait()
    # Proportional set size would give half the shared 48 MB to the neighbour: 24 MB less.
    assert abs(beside - alone) < 6 * MB, (alone / MB, beside / MB)


def test_a_forked_child_sharing_the_roots_pages_counts_them_once():
    block = bytearray(os.urandom(48 * MB))  # private to this process, then shared with the fork
    me = psutil.Process()
    before = tree_memory(me)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: touch nothing, wait to be killed
        os.close(read)
        os.write(write, b"x")
        time.sleep(60)
        os._exit(0)
    try:
        os.close(write)
        os.read(read, 1)
        after = tree_memory(me)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(read)
    assert len(block) == 48 * MB and after - before < 12 * MB, (before / MB, after / MB)


def test_memory_reads_wait_longer_where_one_costs_more_than_its_budget_but_at_most_a_second():
    from speedopt.measure._telemetry import BUDGET, MEMORY_EVERY_S, next_wait

    assert next_wait(0.2, 0.001) == 0.2  # 0.5% of the interval: on time
    assert next_wait(0.2, 0.005) == pytest.approx(0.005 / BUDGET)  # 5 ms of /proc reads: 0.5 s apart, 1% of a core
    assert next_wait(0.2, 0.05) == MEMORY_EVERY_S  # 50 ms: once a second, so a short trial still shows its peak


def test_cpu_and_the_roots_memory_are_read_every_interval():
    from speedopt.measure._telemetry import Sampler

    sampler = Sampler(interval=0.05).start()
    time.sleep(0.6)
    sampler.stop()
    assert len(sampler.samples) >= 6 and all(s.cpu_percent >= 0 for s in sampler.samples)
    assert sampler.peak_ram_mb == max(s.mem_bytes for s in sampler.samples) / 2**20 > 0
