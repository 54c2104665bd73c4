"""The recommendation: the best trial of a study as commands a person can paste, in the study's dialect.

A study measured with the Ultralytics engine recommends ``yolo detect train ...`` (and the equivalent
``YOLO(...).train(...)``); one measured with the classic engine recommends ``python train.py ...``.
Every form parses back to the recommended knobs (:mod:`speedopt.command`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from speedopt import command, engines, machine
from speedopt.errors import UsageError
from speedopt.knobs import Knobs
from speedopt.quality import unchecked_knobs
from speedopt.speedup import METHOD, Speedup
from speedopt.study import SearchOutcome, StudyProtocol, TrialRecord, outcome
from speedopt.study.record_types import CompileDecision

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class Recommendation:
    """The best trial of a study and how to train with it."""

    study: str
    protocol: StudyProtocol
    trial: TrialRecord
    speedup: Speedup | None  # over the baseline, from the finals' paired rounds (None: no gain claimed)
    verdict: str = ""  # the speedup with its interval, "no measurable gain ...", or why none is claimed
    keep_settings: bool = False  # the finals found no measurable gain: this is the baseline
    median_images_per_s: float | None = None  # over the config's finals rounds, when it had them
    #: the torch.compile decision taken on this trial, where it chose a mode: the command compiles, and its images/s
    #: are the compiled rounds' median (the speedup over the baseline stays the finals', measured eager)
    compiled: CompileDecision | None = None
    #: when the search pays for itself over the study's run (SearchOutcome.payback's record): the figure the
    #: search's summary and the report print
    payback: dict[str, Any] | None = None
    #: the changes its ablation found buying nothing measurable (``cache none -> disk (0.978x, 0.850-1.049x)``): the
    #: printed command marks them optional on its own line (issue 56)
    optional: tuple[str, ...] = ()

    @property
    def accuracy(self) -> str:
        """kept (an informative probe pair, or the baseline's own signature), or not checked (quality off and
        an accuracy knob differs); the recommendation is never lost or unknown."""
        q = self.protocol.quality
        return "not checked" if unchecked_knobs(q, self.protocol.baseline, self.knobs) else self.trial.feasibility.word

    @property
    def images_per_s(self) -> float | None:
        """The config's images/s: the median of its compiled rounds where compile was chosen, else of its finals
        rounds when it had them, else its one trial."""
        if self.compiled is not None and self.compiled.choice is not None:
            return self.compiled.median(self.compiled.modes.index(self.compiled.choice) + 1)[0]
        return self.median_images_per_s or self.trial.images_per_s

    @property
    def knobs(self) -> Knobs:
        """The config to train with: the trial's as it ran, compiled where the compile decision chose a mode."""
        choice = self.compiled.choice if self.compiled is not None else None
        return self.trial.config if choice is None else replace(self.trial.config, compile=choice)

    @property
    def words(self) -> engines.Words:
        """What the user types to the study's trainer: its dialect's words (its engine says which)."""
        return self.protocol.engine_spec.words

    def command(self, epochs: int | None = None, device: str | None = None) -> str:
        """The training command in the study's dialect (``device`` "0,1": the multi-GPU form)."""
        return command.train_command(
            self.words.dialect, self.data, self.knobs, device=device or self.device, epochs=epochs, weights=self.weights
        )

    def command_line(self, epochs: int | None = None, device: str | None = None) -> str:
        """:meth:`command` as printed for a person: changes that bought nothing measurable are marked optional in a
        shell comment on the same line (pasted, the command runs as measured)."""
        return command.with_optional(self.command(epochs, device), self.optional)

    @property
    def weights(self) -> str | None:
        """The checkpoint the study's quality probes started from: the real run starts there too, since the
        verdicts (a frozen backbone above all) hold for fine-tuning it, not for training from scratch."""
        return self.protocol.quality.weights

    @property
    def device(self) -> str:
        """The device the command trains on: the first ``gpus`` GPUs of the study's (``0,1`` for gpus=2)."""
        return machine.devices_for(self.protocol.device, self.knobs.gpus)

    @property
    def data(self) -> str:
        """The data.yaml the command trains on: the dataset's, or its prepared copy for data=resized."""
        return self.protocol.data_yaml(self.knobs)

    def python(self, epochs: int | None = None) -> str:
        """The ``YOLO(...).train(...)`` call (Ultralytics studies only)."""
        if not self.words.python_form:
            raise UsageError(f"the {self.protocol.engine} engine has no Python form; use --format cli ({self.words.entry} ...)")
        return command.python_train(self.data, self.knobs, device=self.device, epochs=epochs, weights=self.weights)

    def where(self) -> str:
        """Where the command runs: the classic checkout, or anywhere for Ultralytics."""
        if self.words.checkout_or is None:
            return ""
        return f"in {self.protocol.engine_spec.checkout or self.words.checkout_or}"

    @property
    def stand_in(self) -> str | None:
        """Why there is no training command (a stand-in engine measured the study), else None."""
        if self.protocol.engine_spec.engine.trains_yolov5:
            return None
        return (
            f"no training command: the {self.protocol.engine} engine trains a tiny stand-in net, not YOLOv5 (it measured "
            "the data path and the launcher); carry the knobs over to your trainer's own command"
        )

    def problems(self) -> tuple[str, ...]:
        """Why the printed command may fail in this environment although the trials ran (the engine says)."""
        return self.protocol.engine_spec.engine.command_problems()

    def measure_again(self) -> str:
        """The ``speedopt trial`` command that measures this config again."""
        p = self.protocol
        return command.speedopt_trial(
            self.data, self.knobs, p.device, p.steps, p.warmup, engine_spec=p.engine_spec, max_steps=p.max_steps,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record ``speedopt best --format json|yaml`` prints."""
        return {
            "study": self.study,
            "data": self.data,
            "device": self.device,
            "trial": self.trial.number,
            "config": self.knobs.to_dict(),
            "weights": self.weights,
            "images_per_s": self.images_per_s,
            "speedup": None if self.speedup is None else {
                "median": self.speedup.median, "low": self.speedup.low, "high": self.speedup.high,
                "rounds": self.speedup.rounds, "interval": METHOD,
            },
            "keep_settings": self.keep_settings,
            "verdict": self.verdict,
            "accuracy": {"verdict": self.accuracy, "reason": self.trial.quality_reason},
            "compile": None if self.compiled is None else self.compiled.line(),
            "payback": self.payback,
            "optional": list(self.optional),
        }


def recommend(study: optuna.Study) -> Recommendation | None:
    """The study's recommendation (None while no trial is measured ok and feasible)."""
    return recommendation(outcome(study))


def recommendation(result: SearchOutcome) -> Recommendation | None:
    """The recommendation of a study already summarised (None without a best trial or a protocol)."""
    chosen = result.recommended
    if chosen is None or result.protocol is None:
        return None
    median, _ = result.finals.median(chosen.number) if result.finals else (None, 0)
    decision = result.compile if result.compiled is not None else None
    return Recommendation(
        result.study_name, result.protocol, chosen, result.speedup, result.verdict_text(), result.keep_settings, median,
        decision, result.payback(result.protocol.epochs).to_dict(), _optional(result, chosen.number),
    )


def _optional(result: SearchOutcome, chosen: int) -> tuple[str, ...]:
    """The recommendation's changes its own ablation found buying nothing measurable, with their figures."""
    ablation = result.ablation
    if ablation is None or ablation.recommended != chosen:
        return ()
    return tuple(
        f"{s.text()} ({s.speedup:.3f}x, {s.interval.low:.3f}-{s.interval.high:.3f}x)"
        for s in ablation.idle() if s.speedup is not None and s.interval is not None
    )
