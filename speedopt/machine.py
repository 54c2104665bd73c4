"""What this machine offers a training run: CPU cores, RAM, CUDA devices.

torch is imported lazily (only when a CUDA question is asked) so `speedopt --help` answers at once.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

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
    if len(set(indices)) != len(indices):
        raise UsageError(f"--device {text}: a GPU is listed twice; list each GPU once, e.g. --device 0,1")
    return ",".join(map(str, indices))


def device_count(device: str) -> int:
    """How many processes ``device`` can hold: its GPUs (``0,1`` -> 2), or the cores of a ``cpu`` device."""
    return cpu_cores() if device == "cpu" else len(device.split(","))


def devices_for(device: str, gpus: int) -> str:
    """The device a run on ``gpus`` GPUs of the pool ``device`` uses: its first ``gpus`` indices (``cpu`` stays ``cpu``).

    ``--device 0,1,2,3`` names the GPUs a search may use; a trial with the knob ``gpus=2`` runs on
    ``0,1``, and its printed command says ``device=0,1``.
    """
    if device == "cpu":
        return device
    indices = device.split(",")
    if gpus > len(indices):
        raise UsageError(f"gpus={gpus} needs {gpus} GPUs but --device {device} lists {len(indices)}; list them, e.g. --device {','.join(map(str, range(gpus)))}")
    return ",".join(indices[:gpus])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mb: int


@dataclass(frozen=True)
class MachineKey:
    """The parts that must match for two machines' measurements to be comparable."""

    cpu_model: str
    cpu_cores: int
    ram_gb: int
    gpus: tuple[str, ...]

    def mismatch(self, here: MachineKey) -> str | None:
        """Why measurements of this machine and ``here`` must not share a study (None if they may)."""
        for field, what in (("gpus", "GPU models/count"), ("cpu_cores", "CPU core count"), ("cpu_model", "CPU model")):
            made_on, now = getattr(self, field), getattr(here, field)
            if made_on != now:
                return f"{what} differ: study made on {_show(made_on)!r}, this machine has {_show(now)!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "gpus": list(self.gpus)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineKey:
        return cls(
            cpu_model=str(data.get("cpu_model", "")),
            cpu_cores=int(data.get("cpu_cores", 0)),
            ram_gb=int(data.get("ram_gb", 0)),
            gpus=tuple(data.get("gpus") or ()),
        )


def _show(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class MachineFingerprint:
    """What this machine is, as far as training throughput cares; stored in every study.

    ``key`` holds what must match for measurements to be comparable; the rest describes the moment.
    """

    key: MachineKey
    hostname: str = ""
    cpu_logical: int | None = None
    ram_total_gb: float = 0.0
    ram_available_gb: float = 0.0
    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    cuda_driver: str | None = None
    disk_free_gb: float | None = None
    os: str = ""
    python: str = ""

    @property
    def short_name(self) -> str:
        """A readable tag: the first GPU's model (e.g. ``h200``) or ``cpu``."""
        if not self.key.gpus:
            return "cpu"
        words = [w for w in self.key.gpus[0].lower().replace("nvidia", "").replace("geforce", "").split() if w]
        return "-".join(words[:2]) or "gpu"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["key"] = self.key.to_dict()
        data["gpus"] = [dataclasses.asdict(g) for g in self.gpus]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineFingerprint:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["key"] = MachineKey.from_dict(data.get("key") or {})
        values["gpus"] = tuple(Gpu(str(g["name"]), int(g["memory_mb"])) for g in data.get("gpus") or ())
        return cls(**values)


def nvml_gpus() -> tuple[list[Gpu], str | None, str | None]:
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
            memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20
            gpus.append(Gpu(name.decode() if isinstance(name, bytes) else str(name), memory))
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        return gpus, (driver.decode() if isinstance(driver, bytes) else str(driver)), f"{cuda // 1000}.{cuda % 1000 // 10}"
    finally:
        pynvml.nvmlShutdown()


def fingerprint(disk_path: str = ".") -> MachineFingerprint:
    """This machine now: CPU, RAM, GPUs (via NVML), free disk where the data lives."""
    import platform
    import shutil

    import psutil

    gpus, driver, cuda = nvml_gpus()
    memory = psutil.virtual_memory()
    key = MachineKey(
        cpu_model=_cpu_model(),
        cpu_cores=cpu_cores(),
        ram_gb=round(memory.total / 2**30),
        gpus=tuple(g.name for g in gpus),
    )
    return MachineFingerprint(
        key=key,
        hostname=platform.node(),
        cpu_logical=os.cpu_count(),
        ram_total_gb=round(memory.total / 2**30, 1),
        ram_available_gb=round(memory.available / 2**30, 1),
        gpus=tuple(gpus),
        driver=driver,
        cuda_driver=cuda,
        disk_free_gb=round(shutil.disk_usage(disk_path).free / 2**30, 1),
        os=platform.platform(),
        python=platform.python_version(),
    )


def bf16_supported(device: str) -> bool:
    """Whether every GPU ``device`` lists (``0`` or ``0,1``) has bfloat16 (compute capability 8.0 or newer), via NVML:
    ``amp=bf16`` is offered only there. False on the CPU or without a driver."""
    if device == "cpu":
        return False
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    try:
        majors = [pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(int(i)))[0] for i in device.split(",")]
        return bool(majors) and min(majors) >= 8
    except Exception:  # an index NVML does not know: the device check says so elsewhere
        return False
    finally:
        pynvml.nvmlShutdown()
