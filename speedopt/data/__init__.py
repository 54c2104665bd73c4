"""Datasets: a YOLO data.yaml checked and fingerprinted, and the built-in synthetic demo set."""

from speedopt.data._dataset import (
    IMAGE_SUFFIXES,
    Dataset,
    DatasetFingerprint,
    estimate_ram_cache_bytes,
    fingerprint,
    label_path,
    load,
)
from speedopt.data._demo import CLASSES, FORMATS, DemoSpec, generate, parse_size

__all__ = [
    "CLASSES",
    "IMAGE_SUFFIXES",
    "Dataset",
    "DatasetFingerprint",
    "DemoSpec",
    "FORMATS",
    "estimate_ram_cache_bytes",
    "fingerprint",
    "generate",
    "label_path",
    "load",
    "parse_size",
]
