"""How a running search shows itself: a live rich table on a terminal, plain lines otherwise."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from speedopt.cli._render import shown_name
from speedopt.knobs import Knobs, knobs_text
from speedopt.measure import TrialProgress, TrialResult
from speedopt.quality import Feasibility, Verdict
from speedopt.search import SearchPlan, Step, View
from speedopt.study import SearchOutcome, redact


def view_for(console: Console) -> PlainView:
    """A live table on a terminal, plain lines otherwise."""
    return LiveView(console) if console.is_terminal else PlainView(console)


class _Tracker:
    """Counts, best so far and timing shared by both views."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.started = time.monotonic()
        self.durations: list[float] = []
        self.trial_started = self.started
        self.baseline: float | None = None
        self.best: float | None = None
        self.best_number: int | None = None

    def begin(self, plan: SearchPlan, so_far: SearchOutcome) -> None:
        self.total, self.done = plan.protocol.trials, so_far.complete + so_far.pruned
        if so_far.baseline and so_far.baseline.result.ok:
            self.baseline = so_far.baseline.images_per_s
        if so_far.best:
            self.best, self.best_number = so_far.best.images_per_s, so_far.best.number

    def pruned(self) -> None:
        """A trial pruned part-way: it ran, and counts toward --trials."""
        self.durations.append(time.monotonic() - self.trial_started)
        self.done += 1

    def finish(self, number: int, result: TrialResult, baseline: bool, verdict: Verdict) -> None:
        self.durations.append(time.monotonic() - self.trial_started)
        self.done += 1
        if result.ok and baseline and self.baseline is None:
            self.baseline = result.images_per_s
        speed = result.images_per_s
        feasible = result.ok and verdict.feasibility is Feasibility.FEASIBLE
        if feasible and speed is not None and (self.best is None or speed > self.best):
            self.best, self.best_number = speed, number

    def headline(self) -> str:
        elapsed = time.monotonic() - self.started
        left = self.total - self.done
        eta = (
            f"ETA {_clock(left * sum(self.durations) / len(self.durations))} (mean trial time x {left} left)"
            if self.durations and left > 0
            else "ETA -"
        )
        best = "best -"
        if self.best is not None:
            best = f"fastest feasible so far {self.best:.1f} images/s (trial {self.best_number}, measured once)"
        return f"trial {min(self.done + 1, self.total)} of {self.total} | {best} | elapsed {_clock(elapsed)} | {eta}"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def accuracy_text(verdict: Verdict) -> str:
    """mAP cell: the probe's loss and verdict, or why there is none ("not checked": quality off and
    accuracy knobs that differ from the baseline's, so "kept" would claim what nobody checked)."""
    if verdict.feasibility is Feasibility.NOT_MEASURED:
        return "-"
    if verdict.unchecked:
        return "not checked"
    if verdict.feasibility is Feasibility.UNPROBED:
        return "unprobed" if verdict.reason.startswith("not probed") else "-"
    if verdict.map50_95 is None or verdict.map_loss is None:  # decided without a probe of its own
        return verdict.feasibility.word
    interval = f"+/-{verdict.spread:.3f} " if verdict.spread else ""
    return f"loss {verdict.map_loss:+.3f} {interval}{verdict.feasibility.word}"


def _row_cells(number: int, result: TrialResult, baseline: float | None, verdict: Verdict) -> list[str]:
    ips = result.images_per_s
    speed = f"{ips:.1f}" if ips is not None else "-"
    ratio = f"{ips / baseline:.2f}x" if ips is not None and baseline else "-"
    wait = f"{100 * result.data_wait_fraction:.0f}%" if result.data_wait_fraction is not None else "-"
    return [str(number), knobs_text(result.config), result.status.value, speed, ratio, wait, accuracy_text(verdict)]


class PlainView(View):
    """One line per event, for logs and pipes."""

    def __init__(self, console: Console):
        self.console = console
        self.track = _Tracker()

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)

    def start(self, plan: SearchPlan, so_far: SearchOutcome, notes: list[str]) -> None:
        self.track.begin(plan, so_far)
        self._say(f"study {shown_name(plan.study_name, markup=True)} ({redact(plan.storage_url)}): {so_far.complete} of {plan.protocol.trials} trials complete")
        for note in notes:
            self._say(f"note: {escape(note)}")  # a note may quote a domain, [off, default]: text, not markup

    def trial_started(self, number: int, knobs: Knobs) -> None:
        self.track.trial_started = time.monotonic()
        self._say(f"{self.track.headline()}\n  trial {number}: measuring {knobs_text(knobs)}")

    def trial_progress(self, update: TrialProgress) -> None:
        if update.phase.startswith("probe") and update.done == update.of:
            self._say(f"  {update.text()}")

    def trial_finished(self, number: int, result: TrialResult, baseline: bool, verdict: Verdict) -> None:
        self.track.finish(number, result, baseline, verdict)
        cells = _row_cells(number, result, self.track.baseline, verdict)
        extra = "" if result.ok else f": {result.message}"
        self._say(
            f"  trial {cells[0]}: {cells[2]} {cells[3]} images/s ({cells[4]} baseline, data wait {cells[5]}, "
            f"mAP {cells[6]}){extra}"
        )
        if result.ok and (verdict.map50_95 is not None or verdict.feasibility is not Feasibility.FEASIBLE):
            self._say(f"    accuracy: {verdict.reason}")

    def trial_pruned(self, number: int, why: str) -> None:
        self.track.pruned()
        self.note(f"trial {number}: {why}")

    def note(self, message: str) -> None:
        self._say(f"  {escape(message)}")

    def finals_started(self, finals: tuple[int, ...], repeats: int) -> None:
        self._say(
            f"finals: trial(s) {', '.join(map(str, finals[1:]))} and the baseline (trial {finals[0]}) measured again "
            f"in {repeats} interleaved rounds"
        )

    def ablation_started(self, changes: tuple[str, ...], repeats: int) -> None:
        self._say(
            f"ablation: which change bought what: {'; '.join(changes)}, one at a time (the change that gains most "
            f"first), then the path measured in {repeats} interleaved rounds"
        )

    def step_started(self, step: Step) -> None:
        self._say(f"  {step.label} ({knobs_text(step.knobs)})")

    def step_finished(self, step: Step, result: TrialResult) -> None:
        self._say(f"    {_repeat_text(result)}")


def _repeat_text(result: TrialResult) -> str:
    if not result.ok:
        return f"{result.status.value}: {result.message}"
    ci = f" (+/-{100 * result.ci_rel:.0f}% over {result.steps} steps)" if result.ci_rel is not None else ""
    return f"{result.images_per_s or 0:.1f} images/s{ci}"


class LiveView(PlainView):
    """A live table: one row per finished trial, the running trial's phase, best and ETA above."""

    def __init__(self, console: Console):
        super().__init__(console)
        self.rows: list[list[str]] = []
        self.running = ""  # "trial N ... config" of the trial being measured
        self.phase = ""
        self.live = Live(console=console, refresh_per_second=4, get_renderable=self._render, transient=False)

    def _render(self) -> Group:
        table = Table(show_edge=False)
        for column in ("#", "config", "status", "images/s", "vs baseline", "data wait", "accuracy"):
            table.add_column(column, justify="right" if column in ("#", "images/s") else "left")
        for row in self.rows:
            table.add_row(*row)
        now = f"{self.running}: {self.phase}" if self.running else self.phase
        return Group(Text(self.track.headline(), style="bold"), table, Text(now))

    def start(self, plan: SearchPlan, so_far: SearchOutcome, notes: list[str]) -> None:
        super().start(plan, so_far, notes)
        self.live.start()

    def trial_started(self, number: int, knobs: Knobs) -> None:
        self.track.trial_started = time.monotonic()
        self.running, self.phase = f"trial {number} ({knobs_text(knobs)})", "setup"

    def trial_progress(self, update: TrialProgress) -> None:
        self.phase = update.text()

    def trial_finished(self, number: int, result: TrialResult, baseline: bool, verdict: Verdict) -> None:
        self.track.finish(number, result, baseline, verdict)
        self.rows.append(_row_cells(number, result, self.track.baseline, verdict))
        self.running = self.phase = ""

    def note(self, message: str) -> None:
        self.phase = message

    def price(self, message: str) -> None:
        self.live.console.print(f"  {escape(message)}", highlight=False)  # above the live table, where it stays

    def finals_started(self, finals: tuple[int, ...], repeats: int) -> None:
        self.rows.append(["", f"finals: {len(finals) - 1} config(s) + baseline, {repeats} rounds", "", "", "", "", ""])

    def ablation_started(self, changes: tuple[str, ...], repeats: int) -> None:
        self.rows.append(["", f"ablation: {'; '.join(changes)}, then the path in {repeats} rounds", "", "", "", "", ""])

    def step_started(self, step: Step) -> None:
        self.running, self.phase = f"{step.label} ({knobs_text(step.knobs)})", "setup"

    def step_finished(self, step: Step, result: TrialResult) -> None:
        speed = f"{result.images_per_s:.1f}" if result.ok and result.images_per_s is not None else "-"
        config = knobs_text(step.knobs) if step.number else step.label  # a finals round's row shows its config
        kind = "repeat" if step.stage == "finals" else step.stage
        self.rows.append([step.number, config, result.status.value, speed, "", "", kind])
        self.running = self.phase = ""

    def stop(self) -> None:
        self.live.stop()
