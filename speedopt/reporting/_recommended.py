"""The report's section 4: the recommended command to run, and which of its knobs the trainer's own
command honours on the study's device."""

from __future__ import annotations

from speedopt import engines
from speedopt.knobs import KNOB_NAMES, Knobs, value_text
from speedopt.reporting._recommend import Recommendation
from speedopt.reporting._text import cell
from speedopt.study import StudyProtocol


def command_section(rec: Recommendation | None, epochs: int) -> list[str]:
    """Section 4: the command (and its Python form) for a full run of ``epochs``, with its warnings."""
    lines = ["## 4. Recommended command", ""]
    if rec is None:
        return lines + ["none yet", ""]
    if rec.keep_settings:
        lines += ["No measurable gain on this machine: keep your settings (the baseline's command below).", ""]
    else:
        lines += [f"Trial {rec.trial.number}: {rec.verdict}.", ""]
    if rec.stand_in:
        lines += [rec.stand_in + ".", ""]
    else:
        where = rec.protocol.engine_spec.checkout or rec.words.checkout
        lines += ([f"In {where}:", ""] if where else []) + ["```bash", rec.command_line(epochs), "```", ""]
        lines += ["```python", rec.python(epochs), "```", ""] if rec.words.python_form else []
    problems = rec.problems()
    lines += [f"**Warning:** {problem}." for problem in problems] + ([""] if problems else [])
    lines += gives_up(rec.protocol.baseline, rec.knobs)

    gpus = rec.protocol.machine.gpus
    searched = max(rec.protocol.space.domains["gpus"].values()) > 1 if "gpus" in rec.protocol.space.domains else False
    if len(gpus) > 1 and not searched:
        every = ",".join(str(i) for i in range(len(gpus)))
        lines += [f"On all {len(gpus)} GPUs (DDP; not measured by this study):", "", "```bash",
                  rec.command(epochs, device=every), "```", ""]
    return lines


#: What turning ``deterministic`` off gives up (issue 46): run-to-run reproducibility, not expected accuracy. The
#: Ultralytics trainer then unsets torch's deterministic algorithms and deterministic cuDNN (it does not turn
#: cudnn.benchmark on).
DETERMINISTIC_OFF = ("deterministic=off: runs with the same seed are no longer bit-identical (torch and cuDNN may pick "
                     "non-deterministic, faster kernels); expected accuracy is unchanged")


def gives_up(baseline: Knobs, knobs: Knobs) -> list[str]:
    """The report's sentence on what the recommended ``knobs`` give up that the ``baseline`` kept: only where the
    recommendation turns deterministic off."""
    return [DETERMINISTIC_OFF + ".", ""] if baseline.deterministic and not knobs.deterministic else []


def honoured_section(p: StudyProtocol) -> list[str]:
    """Which knobs the trainer's own command honours on this device (the rest run a fixed value)."""
    spec = p.engine_spec
    engine = spec.engine
    fixed, accepted, rules = engine.fixed_knobs(p.device), engine.accepted(p.device), engine.silent_rules()
    entry = spec.words.entry
    lines = [f"## Knobs the real run honours (`{entry}` on device `{p.device}`)", "",
             "| knob | honoured | what the real run does |", "|---|---|---|"]
    for knob in KNOB_NAMES:
        if knob in fixed:
            value, why = fixed[knob]
            lines.append(f"| {knob} | no | always {value_text(value)}: {cell(why)}; trials ran the same |")
        elif knob == "amp" and p.device == "cpu":
            lines.append("| amp | no | off: AMP needs CUDA; trials ran off |")
        else:
            takes = f"; it takes {', '.join(value_text(v) for v in accepted[knob][0])} ({cell(accepted[knob][1])})" if knob in accepted else ""
            silent = (f"; where the trainer runs it otherwise ({cell(rules[knob])}), a trial ended "
                      f"{engines.SILENT_STATUS[knob].value}" if knob in rules else "")
            lines.append(f"| {knob} | yes | as the command says{takes}{silent} |")
    return lines + [""]
