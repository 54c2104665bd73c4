"""The GPU tier: every test here is marked ``gpu`` and skipped where torch sees no CUDA device.

The device count is read when a GPU test is about to run, not at collection: counting imports torch
(4 s here), and the fast tier, which deselects these tests, should not pay for it.

Each test runs under :data:`GPU_TEST_LIMIT_S`, its fixtures' set-up included, where pytest-timeout is installed
(the test extra; carried as a wheel to a GPU machine, see CONTRIBUTING.md). It is the one limit that holds for a
search run in this process, which ``run_cli``'s ``timeout=`` does not bound. Its signal method fails the test and
goes on with the next one; ``benchmarks/gpu_check.sh`` also passes ``--timeout``, so a missing plugin stops the
tier at once instead of running it without limits.
"""

import functools

import pytest

#: Seconds each GPU test may take (issue 46: the whole tier fits a 15-minute device slot).
GPU_TEST_LIMIT_S = 90


@functools.cache
def _cuda_devices() -> int:
    from speedopt import machine

    return machine.cuda_device_count()


def pytest_collection_modifyitems(config, items):
    limited = config.pluginmanager.hasplugin("timeout")  # pytest-timeout registers the marker it reads
    for item in items:
        if "tests/gpu/" in str(item.fspath):
            item.add_marker(pytest.mark.gpu)
            item.add_marker(pytest.mark.slow)
            if limited:
                item.add_marker(pytest.mark.timeout(GPU_TEST_LIMIT_S, method="signal"))


def pytest_runtest_setup(item):
    if "tests/gpu/" not in str(item.fspath):
        return
    needs = 2 if "two_gpus" in item.name else 1
    count = _cuda_devices()
    if count < needs:
        pytest.skip(f"needs {needs} CUDA device(s); this machine has {count}")
