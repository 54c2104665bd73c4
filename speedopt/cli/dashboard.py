"""`speedopt dashboard`: serve optuna-dashboard on a study storage."""

from __future__ import annotations

import argparse

from speedopt import defaults
from speedopt.cli._options import add_storage, integer
from speedopt.reporting import check_address, serve, study_page
from speedopt.study import find_study, open_storage, quiet_optuna, redact


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "dashboard",
        help="serve the Optuna dashboard on the study storage",
        description="Serve optuna-dashboard for the storage (binds to 127.0.0.1 unless told otherwise). Each study "
        "shows images/s as its objective, each trial's measurements as user attrs and the report as its note; "
        "its best trial is the fastest one measured ok and judged feasible. speedopt's internal probe-cache study "
        "is not listed.",
    )
    add_storage(parser)
    parser.add_argument("--study", help="print the address of this study's page (it must exist in the storage)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=integer(1, 65535), default=8080, help="port (default 8080)")
    # It writes nothing, so SIGTERM ends it at once, by default (see speedopt.cli.interrupt_on_sigterm).
    parser.set_defaults(run=run, sigterm_ends=True)


def run(args: argparse.Namespace) -> int:
    check_address(args.host, args.port)  # one line before the banner: bad --port/--host, a port in use
    quiet_optuna()
    storage = open_storage(args.storage)  # one line before the banner: a storage that does not exist (never created here)
    if args.study is not None:
        find_study(args.storage, args.study)  # one line before the banner: a study that is not there
    study_id = None if args.study is None else storage.get_study_id_from_name(args.study)
    where = redact(args.storage or defaults.STORAGE_URL)
    print(f"speedopt dashboard: {where} at {study_page(args.host, args.port, study_id)} (Ctrl+C stops)", flush=True)
    serve(args.storage, args.host, args.port)
    return 0
