"""speedopt's version, in one place (the package, the study records and the CLI read it here)."""

__version__ = "0.1.0"
