"""speedopt: measure, don't guess, the fastest way to train YOLOv5 on this machine."""

__version__ = "0.1.0"
