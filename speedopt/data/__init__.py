"""Datasets: a YOLO data.yaml checked and fingerprinted, the built-in synthetic demo set, and a dataset's
pre-resized copy (:func:`prepare`, found again by :func:`find_copy`)."""

from speedopt.data._dataset import (
    Dataset,
    DatasetFingerprint,
    fingerprint,
    image_size,
    label_path,
    load,
)
from speedopt.data._demo import FORMATS, PHOTOS, DemoSpec, generate, parse_size
from speedopt.data._listing import list_images
from speedopt.data._manifest import MANIFEST, PreparedCopy, PrepareFormat, PrepareReport, PrepareSpec
from speedopt.data._plan import default_out, source_id
from speedopt.data._prepare import find_copy, prepare
from speedopt.data._root import resolution_env, settings_file, write_trainer_yaml
from speedopt.data._yamlfile import read_yaml

__all__ = [
    "Dataset",
    "DatasetFingerprint",
    "DemoSpec",
    "FORMATS",
    "PHOTOS",
    "fingerprint",
    "generate",
    "image_size",
    "label_path",
    "list_images",
    "load",
    "parse_size",
    "read_yaml",
    "resolution_env",
    "settings_file",
    "write_trainer_yaml",
    "MANIFEST",
    "PrepareFormat",
    "PrepareReport",
    "PrepareSpec",
    "PreparedCopy",
    "default_out",
    "find_copy",
    "prepare",
    "source_id",
]
