"""The one exception type for bad user input.

The CLI turns a :class:`UsageError` into a single line on stderr and exit code 2; everything else
that goes wrong inside a trial becomes a trial status instead (see :mod:`speedopt.status`).
"""


class UsageError(ValueError):
    """Bad input from the user: the message names the problem and the fix, in one line."""
