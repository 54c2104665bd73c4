"""The GPU tier: every test here is marked ``gpu`` and skipped where torch sees no CUDA device."""

import pytest


def _cuda_devices() -> int:
    from speedopt import machine

    return machine.cuda_device_count()


def pytest_collection_modifyitems(config, items):
    count = _cuda_devices()
    for item in items:
        if "tests/gpu/" not in str(item.fspath):
            continue
        item.add_marker(pytest.mark.gpu)
        item.add_marker(pytest.mark.slow)
        needs = 2 if "two_gpus" in item.name else 1
        if count < needs:
            item.add_marker(pytest.mark.skip(reason=f"needs {needs} CUDA device(s); this machine has {count}"))
