"""What a prepared copy is: the spec it is made at (:class:`PrepareSpec`, checked by :func:`check_spec`),
the manifest record of a complete copy (:class:`PreparedCopy`), what one run did (:class:`PrepareReport`),
and the names of the files a copy's root holds besides its images (see :mod:`speedopt.data._prepare`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from speedopt.errors import UsageError
from speedopt.knobs import MAX_IMGSZ, STRIDE
from speedopt.version import __version__

PrepareFormat = Literal["jpg", "png", "npy"]  # a copy's image files: JPEG, PNG, or PNG with the decoded .npy beside it
FORMATS: tuple[PrepareFormat, ...] = get_args(PrepareFormat)
MANIFEST = "speedopt-prepared.json"  # written into the copy's root LAST, when the copy is complete and verified
MARKER = ".speedopt-preparing"  # written FIRST: the folder is a copy in progress (and ours to rewrite)
YAML = "data.yaml"
LISTS = {"train": "speedopt-train.txt", "val": "speedopt-val.txt"}  # image lists for splits that were not one folder


@dataclass(frozen=True)
class PrepareSpec:
    """What copy to make: long side ``imgsz`` (a multiple of the stride), file format, JPEG quality."""

    imgsz: int  # long side; a positive multiple of 32 (speedopt.knobs.STRIDE), at most speedopt.knobs.MAX_IMGSZ
    format: PrepareFormat = "jpg"
    quality: int = 100  # JPEG quality 1..100 (ignored for png/npy: check_spec sets it to 100 there)

    @property
    def tag(self) -> str:
        """The copy's folder name: ``640-jpgq100``, ``640-png``, ``640-npy``."""
        return f"{self.imgsz}-{self.format}" + (f"q{self.quality}" if self.format == "jpg" else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def checked(self) -> PrepareSpec:
        """This spec checked (one line per problem), normalised as :func:`check_spec` does."""
        return check_spec(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrepareSpec:
        return cls(imgsz=int(data["imgsz"]), format=cast(PrepareFormat, str(data["format"])), quality=int(data["quality"]))


@dataclass(frozen=True)
class PreparedCopy:
    """A complete, verified copy as its manifest records it."""

    yaml_path: Path  # the copy's data.yaml (absolute 'path:', train/val relative to it, no 'download:')
    root: Path
    spec: PrepareSpec
    source_yaml: Path
    source_id: str  # fingerprint of the source files when the copy was made (see source_id)
    images: int  # train + val images in the copy
    train_images: int
    bytes: int  # file bytes of the copy's image files (and .npy files)
    source_bytes: int  # file bytes of the source image files
    seconds: float  # wall seconds the runs that made it spent (resumed or updating runs: summed; a rerun that writes nothing adds none)
    jobs: int  # worker processes of the run that completed it
    corrupt: tuple[str, ...] = ()  # source images skipped as unreadable

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's JSON content (paths as strings, plus the speedopt version)."""
        return {
            "speedopt": __version__,
            "spec": self.spec.to_dict(),
            "yaml_path": str(self.yaml_path),
            "source_yaml": str(self.source_yaml),
            "source_id": self.source_id,
            "images": self.images,
            "train_images": self.train_images,
            "bytes": self.bytes,
            "source_bytes": self.source_bytes,
            "seconds": self.seconds,
            "jobs": self.jobs,
            "corrupt": list(self.corrupt),
        }

    @classmethod
    def from_manifest(cls, data: dict[str, Any], root: Path) -> PreparedCopy:
        """Read a manifest (KeyError, TypeError or ValueError when it is not one of ours)."""
        return cls(
            yaml_path=root / YAML,
            root=root,
            spec=PrepareSpec.from_dict(data["spec"]),
            source_yaml=Path(data["source_yaml"]),
            source_id=str(data["source_id"]),
            images=int(data["images"]),
            train_images=int(data["train_images"]),
            bytes=int(data["bytes"]),
            source_bytes=int(data["source_bytes"]),
            seconds=float(data["seconds"]),
            jobs=int(data["jobs"]),
            corrupt=tuple(str(c) for c in data.get("corrupt", ())),
        )


@dataclass(frozen=True)
class PrepareReport:
    """What one prepare run did."""

    copy: PreparedCopy
    written: int  # images written by this run
    reused: int  # images a previous (interrupted) run had already written and that are still current
    seconds: float  # this run's wall time
    images_per_s: float  # written / seconds of the resize phase
    jobs: int  # worker processes it ran: at most one per CPU core and per image
    notes: tuple[str, ...] = ()  # what was adjusted (--jobs capped)


def check_spec(spec: PrepareSpec) -> PrepareSpec:
    """The spec checked (one line per problem), with ``quality`` set to 100 for the lossless formats, which
    ignore it: two specs that make the same copy compare equal."""
    if spec.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {spec.format!r}")
    if isinstance(spec.imgsz, bool) or not isinstance(spec.imgsz, int) or spec.imgsz <= 0 or spec.imgsz % STRIDE:
        raise UsageError(f"--imgsz must be a positive multiple of {STRIDE} (the YOLOv5 stride), got {spec.imgsz!r}; e.g. 640")
    if spec.imgsz > MAX_IMGSZ:
        raise UsageError(f"--imgsz must be at most {MAX_IMGSZ}, got {spec.imgsz}; give a smaller image size")
    if isinstance(spec.quality, bool) or not isinstance(spec.quality, int) or not 1 <= spec.quality <= 100:
        raise UsageError(f"--quality must be a JPEG quality from 1 to 100, got {spec.quality!r}; 100 is the usual choice")
    return spec if spec.format == "jpg" else dataclasses.replace(spec, quality=100)
