"""The `speedopt` command line: parse, call the Python API, print. Nothing else lives here.

One module per command (or pair of commands); each adds its parser and sets ``run``. Bad input
anywhere raises UsageError, which becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from speedopt.cli import ceilings, dashboard, demo_data, doctor, prepare, report, search, studies, transfer, trial, verify
from speedopt.cli._options import Parser
from speedopt.errors import UsageError
from speedopt.version import __version__

COMMANDS = (demo_data, doctor, prepare, trial, ceilings, search, report, verify, dashboard, transfer, studies)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command's parser."""
    parser = Parser(
        prog="speedopt",
        description="Find the fastest way to train a YOLOv5 detector on this machine, by measuring short "
        "real training trials instead of guessing workers, batch, image size, cache and AMP.",
    )
    parser.add_argument("--version", action="version", version=f"speedopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS:
        command.add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not getattr(args, "sigterm_ends", False):
        interrupt_on_sigterm()
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"speedopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"speedopt {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # the environment, not a bug: permissions, a full disk, a vanished file
        print(f"speedopt {args.command}: error: {os_problem(exc)}", file=sys.stderr)
        return 2


def interrupt_on_sigterm() -> None:
    """SIGTERM (``kill PID``, a scheduler's stop, a closed terminal's supervisor) ends every command as Ctrl-C does:
    KeyboardInterrupt, so a trial's process group is killed, its temp folder removed, an interrupted trial failed
    for the rerun to retry, and the command says one line and exits 130. A second SIGTERM while that cleanup runs
    is ignored (SIGKILL still ends it), so the cleanup is never cut short half-way. Only where SIGTERM still has
    its default action: a caller that set its own handler keeps it. A command with nothing to clean up that serves
    requests (the dashboard) sets ``sigterm_ends`` and keeps the default: its server's request handling may swallow
    a KeyboardInterrupt, and the ignored second SIGTERM would then leave it running."""
    import os
    import signal

    owner = os.getpid()

    def interrupt(signum: int, frame: object) -> None:
        if os.getpid() != owner:  # a process forked from this one (a pool worker): SIGTERM ends it, as by default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals are not ours to handle
        pass


def os_problem(exc: OSError) -> str:
    """One line for an operating-system error that reached the top: what failed, on which path (where the error
    names one: a failed write to a stream such as stdout names none), and the fix."""
    import errno

    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p not in (None, "")]
    fixes = {
        errno.EACCES: "run where you can write, or point the command at a writable folder",
        errno.EPERM: "run where you can write, or point the command at a writable folder",
        errno.EROFS: "the filesystem is read-only; point the command at a writable folder",
        errno.ENOSPC: "free some disk space and run the same command again",
        errno.EFBIG: "a file grew past the file size limit (ulimit -f, or the filesystem's); raise it or write elsewhere",
    }
    fix = fixes.get(exc.errno or 0)
    return what + (f": {' -> '.join(paths)}" if paths else "") + (f"; {fix}" if fix else "")
