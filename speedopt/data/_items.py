"""One item of a copy (a source image): its label copied, whether its outputs are current, and, in a
worker process, the image resized and written, or its outputs decoded and checked. How the pixels are
made: see :mod:`speedopt.data._prepare`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from speedopt.data._atomic import _atomic
from speedopt.data._dataset import image_size
from speedopt.data._manifest import PrepareSpec
from speedopt.data._plan import _Item, _Stat, _stat


def _copy_label(item: _Item) -> None:
    """Copy the item's label file byte for byte, stamped with the source's mtime (a vanished one: removed)."""
    if item.label_src is None:
        return
    try:
        content = Path(item.label_src).read_bytes()
    except FileNotFoundError:
        Path(item.label_dst).unlink(missing_ok=True)
        return
    Path(item.label_dst).parent.mkdir(parents=True, exist_ok=True)
    _atomic(Path(item.label_dst), lambda handle: handle.write(content), item.label_mtime_ns)


def _label_current(item: _Item) -> bool:
    if item.label_src is None:
        return True
    have = _stat(Path(item.label_dst))
    return have is not None and have == _Stat(item.label_size, item.label_mtime_ns)


def _image_current(item: _Item) -> bool:
    """The output (and its .npy) exist and carry the source's mtime: a previous run wrote them from this source."""
    if item.mtime_ns < 0:
        return False
    for path in (item.output, item.npy):
        if path is not None:
            have = _stat(Path(path))
            if have is None or have.mtime_ns != item.mtime_ns:
                return False
    return True


def _remove_outputs(item: _Item) -> None:
    """Remove the item's outputs, and the array a ``cache=disk`` trainer decoded from its image."""
    for path in (item.output, _array(item), item.label_dst):
        Path(path).unlink(missing_ok=True)


def _array(item: _Item) -> str:
    """The ``.npy`` beside the item's image: the copy's own (format npy), or a ``cache=disk`` trainer's,
    which both trainers read in place of the image (so it goes when the image does, or is rewritten)."""
    return item.npy or str(Path(item.output).with_suffix(".npy"))


# ------------------------------------------------------------------------ in the worker processes


def _fit(image: Any, imgsz: int) -> Any:
    """Resize so the long side is imgsz, as Ultralytics' ``load_image`` does; never upscale."""
    import cv2

    h0, w0 = image.shape[:2]
    r = imgsz / max(h0, w0)
    if r >= 1:
        return image
    size = (min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz))
    return cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)


def _encoded(image: Any, spec: PrepareSpec) -> bytes:
    """The image encoded in the copy's format: JPEG at ``quality``, or lossless PNG."""
    import cv2

    if spec.format == "jpg":
        ok, buffer = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, spec.quality])
    else:
        ok, buffer = cv2.imencode(".png", image)
    if not ok:
        raise OSError(f"OpenCV could not encode a {image.shape[1]}x{image.shape[0]} image as {spec.format}")
    return bytes(buffer)


CORRUPT = ""  # :func:`_resize_one`'s answer for a source OpenCV cannot read


def _dropped(source: str) -> str | None:
    """Why the trainers drop ``source``, read from its header alone (nothing decoded), or None when they keep
    it: both trainers' label scans ``PIL.Image.open`` every image, which refuses one over twice
    ``Image.MAX_IMAGE_PIXELS`` (DecompressionBombError: the image is dropped as corrupt). Checked here with
    the same PIL and limit, before OpenCV would decode it in full (30000x30000: 2.7 GB of pixels)."""
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # under the limit: the trainers keep it
            with Image.open(source):
                return None
    except Image.DecompressionBombError as exc:
        return f"{source}: {exc}"
    except Exception:  # not for PIL to say (unidentified, truncated, a missing plug-in): OpenCV decides below
        return None


def _resize_one(item: _Item) -> tuple[int, str | None]:
    """Read, resize and write one image (and its .npy and label): ``(index, None)``; ``(index, CORRUPT)`` when
    the source is corrupt, ``(index, why)`` when the trainers drop it unread (see :func:`_dropped`)."""
    import cv2
    import numpy as np

    dropped = _dropped(item.source)
    if dropped is not None:
        return item.index, dropped
    image = cv2.imread(item.source, cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        return item.index, CORRUPT
    image = _fit(image, item.spec.imgsz)
    output = Path(item.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if item.npy is None:
        Path(_array(item)).unlink(missing_ok=True)  # a trainer's array of the old image
    data = _encoded(image, item.spec)
    _atomic(output, lambda handle: handle.write(data), item.mtime_ns)
    if item.npy is not None:
        _atomic(Path(item.npy), lambda handle: np.save(handle, np.ascontiguousarray(image), allow_pickle=False), item.mtime_ns)
    _copy_label(item)
    return item.index, None


def _source_long_side(source: str) -> int | None:
    """The source's long side from its header (orientation does not change it), else from a full decode."""
    size = image_size(Path(source))
    if size is not None:
        return max(size)
    import cv2

    image = cv2.imread(source, cv2.IMREAD_COLOR)
    return None if image is None else int(max(image.shape[:2]))


def _check_one(item: _Item) -> tuple[int, str | None]:
    """Decode one output in full and check it: ``(index, problem)``, problem None when it is right."""
    import cv2
    import numpy as np

    if not Path(item.output).is_file():
        return item.index, "is missing"
    image = cv2.imread(item.output, cv2.IMREAD_COLOR)
    if image is None:
        return item.index, "does not decode"
    long_side = _source_long_side(item.source)
    if long_side is None:
        return item.index, f"its source {item.source} no longer reads as an image"
    want, got = min(item.spec.imgsz, long_side), int(max(image.shape[:2]))
    if got != want:
        return item.index, f"has long side {got}, expected {want}"
    if item.npy is not None:
        try:
            array = np.load(item.npy, allow_pickle=False)
        except (OSError, ValueError):
            return item.index, f"has no readable {Path(item.npy).name} beside it"
        if array.dtype != np.uint8 or array.shape != image.shape or not np.array_equal(array, image):
            return item.index, f"differs from the array in {Path(item.npy).name}"
    if item.label_src is not None and _stat(Path(item.label_dst)) != _Stat(item.label_size, item.label_mtime_ns):
        return item.index, f"has no current label copy at {item.label_dst}"
    return item.index, None
