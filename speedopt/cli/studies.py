"""`speedopt studies`: list the studies in a storage."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from speedopt import defaults
from speedopt.cli._options import add_storage
from speedopt.cli._render import shown_name
from speedopt.status import Status
from speedopt.study import list_studies, quiet_optuna, redact


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("studies", help="list the studies in a storage", description="List studies with trial counts and best measured throughput.")
    add_storage(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    quiet_optuna()
    rows = list_studies(args.storage)
    if not rows:
        print(f"no studies in {redact(args.storage or defaults.STORAGE_URL)}")
        return 0
    table = Table("study", "trials", "complete", "ok", "recommended images/s", "speedup (interval)", "data")
    for r in rows:
        best = r.outcome.recommended
        s = r.outcome.speedup
        speed = f"{s.median:.2f}x ({s.low:.2f}-{s.high:.2f}, {s.rounds} rounds)" if s else (
            "none measurable" if r.outcome.keep_settings else "-"
        )
        table.add_row(
            shown_name(r.study, markup=True), str(r.trials), str(r.outcome.complete), str(r.outcome.by_status.get(Status.OK, 0)),
            f"{best.images_per_s or 0:.1f}" if best else "-", speed, shown_name(r.data, markup=True),
        )
    Console().print(table)
    return 0
