"""The memory line: fitted from two measured points, predicting a batch's peak, refusing over 90%."""

import pytest

from speedopt.data import load
from speedopt.knobs import Knobs
from speedopt.search import _memory_model as memory


def _fit(kind: str = "gpu") -> memory.MemoryFit:
    return memory.MemoryFit("k", kind, (8, 16), (3000.0, 5000.0))


def test_the_line_predicts_other_batches_and_never_slopes_down():
    fit = _fit()
    assert fit.slope_mb == 250.0 and fit.predict(32) == 9000.0 and fit.predict(8) == 3000.0
    assert memory.MemoryFit("k", "gpu", (8, 16), (5000.0, 4990.0)).predict(64) == 5000.0  # noise: flat, not shrinking
    assert memory.MemoryFit.from_dict(fit.to_dict()) == fit


def test_ddp_predicts_each_gpus_share_of_the_batch():
    assert memory.predict(_fit(), Knobs(batch=64, gpus=4)).peak_mb == 5000.0  # 16 per GPU
    assert memory.fit_knobs(Knobs(batch=64, gpus=4, workers=8, cache="ram"), "0,1,2,3", 8) == Knobs(
        batch=32, gpus=4, workers=0, cache="none"
    )


def test_gpu_and_ram_signatures_differ_in_what_memory_depends_on():
    a, b = Knobs(workers=2, cache="ram"), Knobs(workers=4, cache="none")
    assert memory.memory_key(a, "0") == memory.memory_key(b, "0")  # GPU memory: not workers, not cache
    assert memory.memory_key(a, "cpu") != memory.memory_key(b, "cpu")  # RAM: each worker is a process
    assert memory.memory_key(Knobs(amp=True), "0") != memory.memory_key(Knobs(amp=False), "0")


def test_cache_ram_on_the_cpu_adds_the_decoded_images(demo_yaml):
    ds = load(demo_yaml)
    plain = memory.predict(_fit("ram"), Knobs(batch=16, imgsz=128), ds, 48)
    cached = memory.predict(_fit("ram"), Knobs(batch=16, imgsz=128, cache="ram"), ds, 48)
    extra = (48 + 8) * 120 * 160 * 3 * (128 / 160) ** 2 / 2**20  # 160x120 demo images, long side to 128
    assert cached.peak_mb - plain.peak_mb == pytest.approx(extra, rel=0.01)
    assert "decoded images cached" in cached.basis


def test_over_ninety_percent_is_refused_with_the_basis():
    prediction = memory.predict(_fit(), Knobs(batch=32))  # 9000 MB
    assert memory.refusal(prediction, 10_000) is None
    why = memory.refusal(prediction, 9_000)
    assert why and "predicted peak GPU memory 9000 MB is over 90% of the 9000 MB" in why and "line through batch 8" in why
