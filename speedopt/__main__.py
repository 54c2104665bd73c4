"""`python -m speedopt`: the command line."""

from speedopt.cli import main

raise SystemExit(main())
