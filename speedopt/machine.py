"""What this machine offers a training run: CPU cores, RAM, CUDA devices.

torch is imported lazily (only when a CUDA question is asked) so `speedopt --help` answers at once.
"""

from __future__ import annotations

import os

from speedopt.errors import UsageError


def cpu_cores() -> int:
    """Cores this process may use (affinity-aware), which bounds useful dataloader workers."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cuda_device_count() -> int:
    """Number of CUDA devices torch can see here (0 on a machine without a working driver)."""
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except RuntimeError:
        return 0


def default_device() -> str:
    """The trainer's default: the first GPU when there is one, else the CPU."""
    return "0" if cuda_device_count() else "cpu"


def parse_device(text: str | None) -> str:
    """Validate a --device value (``cpu``, ``0``, ``0,1``) against the devices that exist here."""
    if text is None:
        return default_device()
    value = text.strip().lower().removeprefix("cuda:")
    if value == "cpu":
        return "cpu"
    try:
        indices = [int(v) for v in value.split(",") if v.strip() != ""]
    except ValueError:
        raise UsageError(f"--device must be cpu, a GPU index like 0, or a list like 0,1; got {text!r}") from None
    if not indices or any(i < 0 for i in indices):
        raise UsageError(f"--device must be cpu, a GPU index like 0, or a list like 0,1; got {text!r}")
    count = cuda_device_count()
    missing = [i for i in indices if i >= count]
    if missing:
        have = f"{count} CUDA device(s) (0-{count - 1})" if count else "no CUDA device"
        raise UsageError(f"--device {text}: CUDA device {missing[0]} does not exist; this machine has {have}; use --device cpu")
    if len(indices) > 1:
        raise UsageError(f"--device {text}: multi-GPU (DDP) trials are not supported yet; measure one GPU, e.g. --device {indices[0]}")
    return ",".join(map(str, indices))


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _gpus() -> tuple[list[dict], str | None, str | None]:
    """GPU names and memory, driver and CUDA driver version, via NVML (empty without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return [], None, None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(
                {
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "memory_mb": pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
                }
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return gpus, (driver.decode() if isinstance(driver, bytes) else driver), f"{cuda // 1000}.{cuda % 1000 // 10}"
    finally:
        pynvml.nvmlShutdown()


def fingerprint(disk_path: str = ".") -> dict:
    """What this machine is, as far as training throughput cares; stored in every study.

    ``key`` holds the parts that must match for two machines' measurements to be comparable
    (CPU model and cores, RAM size, GPU models and count); the rest describes the moment.
    """
    import platform
    import shutil

    import psutil

    gpus, driver, cuda = _gpus()
    memory = psutil.virtual_memory()
    key = {
        "cpu_model": _cpu_model(),
        "cpu_cores": cpu_cores(),
        "ram_gb": round(memory.total / 2**30),
        "gpus": [g["name"] for g in gpus],
    }
    return {
        "key": key,
        "hostname": platform.node(),
        "cpu_logical": os.cpu_count(),
        "ram_total_gb": round(memory.total / 2**30, 1),
        "ram_available_gb": round(memory.available / 2**30, 1),
        "gpus": gpus,
        "driver": driver,
        "cuda_driver": cuda,
        "disk_free_gb": round(shutil.disk_usage(disk_path).free / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def short_name(fp: dict) -> str:
    """A readable tag for the machine: the first GPU's model (e.g. ``h200``) or ``cpu``."""
    gpus = fp["key"]["gpus"]
    if not gpus:
        return "cpu"
    words = [w for w in gpus[0].lower().replace("nvidia", "").replace("geforce", "").split() if w]
    return "-".join(words[:2]) or "gpu"
