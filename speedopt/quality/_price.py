"""What judging a candidate costs against what it could save: probes are bought only where they pay.

A verdict is worth its probes only when the candidate's measured speedup, over the user's whole run
(``--epochs`` x train images), saves more time than the probes the next look still needs. The cost is
estimated before the probes run, from probes already measured at that budget (the baseline's, which run
first), scaled by the budget's size for a budget not yet tried; the saving from the trials' measured
images/s. Both are estimates and are labelled so wherever they are printed.
"""

from __future__ import annotations

from dataclasses import dataclass


def rough(seconds: float) -> str:
    """A duration as a person says it before it happens: ``under a minute``, ``41 min``, ``2 h 05 min``."""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def saving_s(run_images: int, baseline_ips: float | None, candidate_ips: float) -> float | None:
    """Seconds a run of ``run_images`` trained images saves at ``candidate_ips`` against ``baseline_ips``
    (negative when the candidate is slower); None when either speed is unknown."""
    if not run_images or not baseline_ips or baseline_ips <= 0 or candidate_ips <= 0:
        return None
    return run_images / baseline_ips - run_images / candidate_ips


@dataclass(frozen=True)
class Price:
    """The next look at a candidate: the probes it runs, their estimated seconds (None: nothing measured to
    estimate from) with the estimate's basis, and the seconds deciding could save over the user's run."""

    probes: int
    seconds: float | None
    basis: str
    saving: float | None
    run_epochs: int

    @property
    def worth(self) -> bool:
        """Whether the look pays: its probes cost less than the saving (an unknown cost or saving does not stop it)."""
        if self.probes == 0 or self.seconds is None or self.saving is None:
            return True
        return self.seconds < self.saving

    def saving_text(self) -> str:
        """``it could save 41 min over your 100 epochs`` (or that it saves nothing, or that nobody knows)."""
        if self.saving is None:
            return "its saving is unknown (the baseline's speed was not measured)"
        if self.saving <= 0:
            return f"it saves nothing over your {self.run_epochs} epochs (not faster than the baseline)"
        return f"it could save {rough(self.saving)} over your {self.run_epochs} epochs (estimate: measured images/s)"

    def cost_text(self) -> str:
        """``about 3 min of probes (4 probes, estimate: ...)``."""
        probes = f"{self.probes} probe{'' if self.probes == 1 else 's'}"
        if self.seconds is None:
            return f"{probes} of unknown cost"
        about = "" if self.seconds < 60 else "about "
        return f"{about}{rough(self.seconds)} of probes ({probes}; estimate: {self.basis})"

    def text(self) -> str:
        return f"{self.cost_text()}; {self.saving_text()}"
