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
from speedopt.data._demo import CLASSES, FORMATS, PHOTOS, DemoSpec, generate, parse_size
from speedopt.data._prepare import FORMATS as PREPARE_FORMATS
from speedopt.data._prepare import (
    MANIFEST,
    PreparedCopy,
    PrepareReport,
    PrepareSpec,
    check_spec,
    default_out,
    find_copy,
    prepare,
    source_id,
)
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
    "PHOTOS",
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
    "MANIFEST",
    "PREPARE_FORMATS",
    "PrepareReport",
    "PrepareSpec",
    "PreparedCopy",
    "check_spec",
    "default_out",
    "find_copy",
    "prepare",
    "source_id",
]
