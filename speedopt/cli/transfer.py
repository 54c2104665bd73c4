"""`speedopt export` and `speedopt import`: move a study (and its probe cache) between storages."""

from __future__ import annotations

import argparse

from speedopt.cli._options import add_storage, add_study
from speedopt.study import export, import_study, quiet_optuna


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exp = sub.add_parser("export", help="write a study to one portable file (SQLite .db or journal .log)")
    add_study(exp, required=True)
    add_storage(exp, what="its storage URL")
    exp.add_argument("-o", "--output", required=True, metavar="FILE", help="new file: *.db (SQLite) or *.log (journal)")
    exp.set_defaults(run=run_export)

    imp = sub.add_parser("import", help="bring an exported study (and its probe cache) into a storage")
    imp.add_argument("file", help="an exported .db/.log file, optionally FILE::STUDY")
    add_storage(imp, what="target storage URL")
    imp.set_defaults(run=run_import)


def run_export(args: argparse.Namespace) -> int:
    quiet_optuna()
    trials, entries = export(args.study, args.storage, args.output)
    print(f"exported study {args.study!r}: {trials} trials and {entries} probe result(s) to {args.output}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    quiet_optuna()
    name, trials, added, notes = import_study(args.file, args.storage)
    print(f"imported study {name!r}: {trials} trials, {added} new probe result(s)")
    for note in notes:
        print(f"note: {note}")
    return 0
