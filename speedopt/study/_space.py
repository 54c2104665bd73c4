"""A study's search space as stored: which values each knob may take (its :class:`Domain`), per knob.

How a search builds one on this machine (defaults, ``--space FILE``, ``--fix``) is
:mod:`speedopt.search._space`; the stored form is :meth:`Space.to_dict`, read back by :meth:`Space.from_dict`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from speedopt.errors import UsageError
from speedopt.knobs import Knobs, shown, value_text

MAX_VALUES = 10_000  # a stored range with more values than this was not made by speedopt (batch <= 4096)


@dataclass(frozen=True)
class Domain:
    """One knob's values: a list of choices, or an integer range low..high by step."""

    choices: tuple[Any, ...] | None = None
    low: int | None = None
    high: int | None = None
    step: int = 1

    def values(self) -> tuple[Any, ...]:
        """Every value in the domain, in order."""
        if self.choices is not None:
            return self.choices
        assert self.low is not None and self.high is not None
        return tuple(range(self.low, self.high + 1, self.step))

    def with_value(self, value: Any) -> Domain:
        """This domain widened (if needed) so that it contains ``value``."""
        if value in self.values():
            return self
        if self.choices is not None:
            return dataclasses.replace(self, choices=tuple(sorted((*self.choices, value), key=_order)))
        assert self.low is not None and self.high is not None
        if (value - self.low) % self.step:
            return Domain(choices=tuple(sorted({*self.values(), value})))
        return dataclasses.replace(self, low=min(self.low, value), high=max(self.high, value))

    def text(self) -> str:
        """The domain as a user wrote it: ``[4, 8]``, ``[on, off]`` or ``320..640 step 32``."""
        if self.choices is not None:
            return f"[{', '.join(value_text(v) for v in self.choices)}]"
        return f"{self.low}..{self.high}" + (f" step {self.step}" if self.step != 1 else "")

    def to_dict(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, "step": self.step}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Domain:
        if "choices" in data:
            return cls(choices=tuple(data["choices"]))
        return cls(low=data["low"], high=data["high"], step=data.get("step", 1))


def _small_range(d: Domain) -> bool:
    """``d`` is an integer range of at most MAX_VALUES values."""
    ends = (d.low, d.high, d.step)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in ends):
        return False
    assert d.low is not None and d.high is not None
    return d.step >= 1 and d.low <= d.high and (d.high - d.low) // d.step < MAX_VALUES


def _order(value: Any) -> Any:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


@dataclass(frozen=True)
class Space:
    """A domain per knob. A knob with a single value is fixed: it is not sampled."""

    domains: dict[str, Domain]

    def fixed(self) -> dict[str, Any]:
        """Knobs pinned to one value."""
        return {k: d.values()[0] for k, d in self.domains.items() if len(d.values()) == 1}

    def sampled(self) -> dict[str, Domain]:
        """Knobs the sampler chooses."""
        return {k: d for k, d in self.domains.items() if len(d.values()) > 1}

    def containing(self, knobs: Knobs) -> Space:
        """The space widened so every sampled knob's domain holds this config's value (the baseline)."""
        values = knobs.to_dict()
        return Space({k: (d.with_value(values[k]) if len(d.values()) > 1 else d) for k, d in self.domains.items()})

    def outside(self, knobs: Knobs) -> str | None:
        """Why a config (as it ran) is no point of this space: a knob at a value its domain lacks (a fixed knob
        at another value: the baseline's other model). None: the config is one of the space's."""
        values = knobs.to_dict()
        for knob, d in self.domains.items():
            if knob in values and values[knob] not in d.values():
                fixed = len(d.values()) == 1
                return f"it ran {knob}={value_text(values[knob])}, " + (
                    f"which the search fixes at {value_text(d.values()[0])}" if fixed else "a value the search does not try"
                )
        return None

    def to_dict(self) -> dict[str, Any]:
        return {k: d.to_dict() for k, d in self.domains.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Space:
        """The stored form back. An imported study is input too: a range that would enumerate more than
        :data:`MAX_VALUES` values (or is not one) is refused in one line instead of exhausting memory."""
        domains = {k: Domain.from_dict(v) for k, v in data.items()}
        for knob, d in domains.items():
            if d.choices is None and not _small_range(d):
                raise UsageError(
                    f"the study's stored space has a {knob} range that is not a sane range ({shown(d.to_dict())}); "
                    "it was not made by this speedopt: start a new study"
                )
        return cls(domains)
