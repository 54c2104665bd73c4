"""Datasets: a YOLO data.yaml checked and fingerprinted, and the built-in synthetic demo set."""

from speedopt.data._dataset import (
    IMAGE_SUFFIXES,
    Dataset,
    DatasetFingerprint,
    SampledSizes,
    estimate_ram_cache_bytes,
    fingerprint,
    label_path,
    load,
    sample_sizes,
)
from speedopt.data._demo import CLASSES, FORMATS, DemoSpec, generate, parse_size
from speedopt.data._root import datasets_dir, resolution_env, write_trainer_yaml
from speedopt.data._yamlfile import MAX_BYTES, read_yaml

__all__ = [
    "CLASSES",
    "IMAGE_SUFFIXES",
    "MAX_BYTES",
    "Dataset",
    "DatasetFingerprint",
    "DemoSpec",
    "FORMATS",
    "SampledSizes",
    "datasets_dir",
    "estimate_ram_cache_bytes",
    "fingerprint",
    "generate",
    "label_path",
    "load",
    "parse_size",
    "read_yaml",
    "resolution_env",
    "sample_sizes",
    "write_trainer_yaml",
]
