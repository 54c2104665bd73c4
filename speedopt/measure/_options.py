"""How a trial is measured and where it runs, as one typed value: :class:`TrialOptions`.

``speedopt trial``, ``speedopt ceilings`` and ``speedopt search`` take these options (the CLI's
measurement group), the Python API takes them as keyword arguments of the same names, a search holds
them for every trial it runs, and :func:`~speedopt.measure.make_request` reads them. They are checked
in one place, :meth:`TrialOptions.check`.
"""

from __future__ import annotations

from dataclasses import dataclass

from speedopt import defaults
from speedopt.engines import Engine, EngineName, RecordsEngine
from speedopt.errors import UsageError
from speedopt.measure._checks import positive


@dataclass(frozen=True)
class TrialOptions(RecordsEngine):
    """One trial's measurement options; each default is the CLI's (see :mod:`speedopt.defaults`)."""

    steps: int = defaults.STEPS  # the minimum measured steps
    max_steps: int | None = None  # the adaptive window's maximum; None: defaults.MAX_STEPS_FACTOR x steps
    warmup: int = defaults.WARMUP
    timeout_s: float = defaults.TRIAL_TIMEOUT_S  # one trial's (a search's --trial-timeout)
    device: str | None = None  # None: GPU 0 if any, else cpu
    engine: EngineName = "ultralytics"
    yolov5_dir: str | None = None  # the classic engine's checkout; None: the yolov5 package
    ram_limit_gb: float | None = None  # RAM cache=ram may assume is available; None: what is free

    def check(self, timeout_flag: str = "--timeout") -> Engine:
        """Every option checked, each refused in one line (UsageError) naming its flag; the engine, its
        trainer installed. ``timeout_flag``: the per-trial timeout's flag (a search's is ``--trial-timeout``)."""
        if self.steps < 2:
            raise UsageError(f"--steps must be at least 2 (measured steps), got {self.steps}")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UsageError(f"--max-steps must be at least --steps ({self.steps}), got {self.max_steps}")
        if self.warmup < 1:
            raise UsageError(f"--warmup must be at least 1 (the first batches build workers and caches), got {self.warmup}")
        positive(self.timeout_s, timeout_flag, "seconds")
        if self.ram_limit_gb is not None:
            positive(self.ram_limit_gb, "--ram-limit", "GiB")
        engine = self.engine_spec.engine
        if engine.version() is None:
            hint = engine.install_hint or f"pip install {self.engine}"
            raise UsageError(f"the {self.engine} trainer is not installed; {hint}")
        return engine

    @property
    def most_steps(self) -> int:
        """The adaptive window's maximum: ``max_steps``, else defaults.MAX_STEPS_FACTOR x ``steps``."""
        return defaults.max_steps(self.steps, self.max_steps)

    @property
    def ram_limit_bytes(self) -> int | None:
        """``--ram-limit`` in bytes (None: what is free)."""
        return None if self.ram_limit_gb is None else int(self.ram_limit_gb * 2**30)

    @property
    def checkout(self) -> str | None:
        """The classic engine's checkout as an absolute path (None: the yolov5 package)."""
        return self.engine_spec.resolved().checkout
