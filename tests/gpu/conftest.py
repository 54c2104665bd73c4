"""The GPU tier: every test here is marked ``gpu`` and skipped where torch sees no CUDA device.

The device count is read when a GPU test is about to run, not at collection: counting imports torch
(4 s here), and the fast tier, which deselects these tests, should not pay for it.
"""

import functools

import pytest


@functools.cache
def _cuda_devices() -> int:
    from speedopt import machine

    return machine.cuda_device_count()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath):
            item.add_marker(pytest.mark.gpu)
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item):
    if "tests/gpu/" not in str(item.fspath):
        return
    needs = 2 if "two_gpus" in item.name else 1
    count = _cuda_devices()
    if count < needs:
        pytest.skip(f"needs {needs} CUDA device(s); this machine has {count}")
