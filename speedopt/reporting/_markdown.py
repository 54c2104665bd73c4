"""The study's report: a markdown file a person can act on, with PNG figures and the trial table beside it.

Every figure in it is read from the study (its records and trial table) or measured for it (one timed
validation pass and checkpoint save per projected config); projections are labelled as estimates with their inputs.

This module puts the report together in its order and writes it; each section is written by the module
named for it (:mod:`~speedopt.reporting._setup`, :mod:`~speedopt.reporting._verdict`,
:mod:`~speedopt.reporting._full_run`, :mod:`~speedopt.reporting._recommended`,
:mod:`~speedopt.reporting._trials`, :mod:`~speedopt.reporting._analysis` and the smaller ones).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from speedopt import engines
from speedopt.errors import UsageError
from speedopt.reporting import _ablation as ablation
from speedopt.reporting import _artifacts as artifacts_mod
from speedopt.reporting._accuracy import accuracy_section
from speedopt.reporting._analysis import bottlenecks_section, importance_section, report_figures
from speedopt.reporting._bill import bill_section
from speedopt.reporting._ceilings import bound_section, ceilings_section
from speedopt.reporting._compile import compile_section
from speedopt.reporting._filename import report_files, write_inside
from speedopt.reporting._full_run import projection_section, projections
from speedopt.reporting._gather import trial_table, write_csv
from speedopt.reporting._images import copies_section
from speedopt.reporting._loggers import logger_integrations
from speedopt.reporting._memory import memory_section
from speedopt.reporting._overheads import overhead_advice
from speedopt.reporting._recommend import recommendation
from speedopt.reporting._recommended import command_section, honoured_section
from speedopt.reporting._scaling import scaling_section
from speedopt.reporting._setup import machine_and_dataset_section, warm_start_section
from speedopt.reporting._trials import ended_early_section, trials_section
from speedopt.reporting._trials import pruned_section as _pruned  # the name tests/search/test_stop.py imports
from speedopt.reporting._verdict import finals_section, side_by_side_section
from speedopt.reporting._verify import verified_section
from speedopt.study import StudyProtocol, outcome, schema
from speedopt.study.notes import save_note

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class Written:
    """What a report wrote: the markdown, its figures, the trial table."""

    markdown: Path
    figures: tuple[Path, ...]
    csv: Path


def build(study: optuna.Study, epochs: int, out_dir: Path, measure_validation: bool = True, artifacts: Path | None = None) -> Written:
    """Write ``out_dir/<study>.md``, its figures in ``out_dir/<study>/`` and ``out_dir/<study>.csv`` (``<study>``:
    the study's name made a safe file name, see :mod:`speedopt.reporting._filename`); the report is the study's
    dashboard note, its figures uploaded as the study's artifacts into ``artifacts`` (the storage's store)."""
    if artifacts is not None:
        schema.read_artifacts(study)  # the figure ids it will replace: a bad one is refused before anything is written
    result = outcome(study)
    done = list(result.trials)
    if not done:
        raise UsageError(f"study {study.study_name!r} has no completed trial yet; run `speedopt search` first")
    files = report_files(out_dir, study.study_name)  # safe names inside out_dir, writable: before anything slow
    p = result.protocol or StudyProtocol.from_attrs(study.user_attrs, study.study_name)  # the latter says why not
    table = trial_table(study, done)
    base, best = result.baseline, result.recommended
    projected, val_notes = projections(study, result, (base, best), epochs, measure_validation)
    outside = {r.number: why for r in done if (why := p.space.outside(r.config)) is not None}  # no point of the space
    figs = report_figures(table, p, result, files.figures, frozenset(outside))
    md = [f"# speedopt report: {study.study_name}", ""]
    md += machine_and_dataset_section(p, result, done, schema.read_labels(study)) + side_by_side_section(base, best, result)
    md += bound_section(study, result)
    pb, pr = (projected.get(r.number) if r else None for r in (base, best))
    certain = result.speedup is not None and result.speedup.certain
    md += finals_section(result) + compile_section(result) + ablation.section(study, result, files.figures, files.link)
    md += projection_section(epochs, pb, pr, val_notes, certain) + bill_section(result, epochs)
    md += overhead_advice(pr or pb, engines.words(p.engine), logger_integrations(p.engine)) + copies_section(p, epochs)
    md += verified_section(study)
    md += command_section(recommendation(result), epochs)
    md += honoured_section(p) + warm_start_section(p, done)
    md += ceilings_section(study, result) + _pruned(study)
    md += trials_section(table, base) + scaling_section(done) + memory_section(done) + ended_early_section(result)
    md += bottlenecks_section(p, done, projected, epochs) + importance_section(study, done, outside)
    for title, fig in figs:
        md += [f"![{title}]({files.link}/{fig.name})", ""]
    md += accuracy_section(p, result)
    md.append(f"_Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by speedopt report; "
              f"the trial table is {files.csv.name}._")
    path = files.markdown
    text = "\n".join(md) + "\n"
    write_inside(path, lambda handle: handle.write(text.encode("utf-8", "surrogateescape")))
    csv = write_csv(table, files.csv)
    links = artifacts_mod.upload(study, artifacts, [fig for _, fig in figs]) if artifacts is not None else {}
    _save_note(study, text, path, links)
    return Written(path, tuple(fig for _, fig in figs), csv)


def _save_note(study: optuna.Study, text: str, path: Path, links: dict[str, str]) -> None:
    """The report as the study's note in optuna-dashboard: each figure from the study's artifacts (``links``, by
    file name), or named when it was not uploaded (it lives on disk beside the report)."""
    def shown(line: str) -> str:
        if not line.startswith("!["):
            return line
        target = line[line.index("](") + 2:-1]
        link = links.get(Path(target).name)
        return f"{line[:line.index('](')]}]({link})" if link else f"_(figure: {target} beside {path.name})_"

    save_note(study, "\n".join(shown(line) for line in text.splitlines()))
