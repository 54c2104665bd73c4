"""What quality probes train on: the study's data (or the prepared copy at a signature's imgsz), its fingerprint,
the trainer and device, and the user's run a probe is priced against and is a miniature of."""

from __future__ import annotations

from dataclasses import dataclass

from speedopt import defaults
from speedopt.engines import EngineSpec
from speedopt.errors import UsageError
from speedopt.knobs import Knobs


@dataclass(frozen=True)
class ProbeTarget:
    """What probes train on: the study's data, dataset fingerprint, trainer and device."""

    data: str
    dataset_id: str
    engine_spec: EngineSpec
    device: str
    copies: tuple[tuple[int, str], ...] = ()  # (imgsz, data.yaml) of the prepared copies data=resized trains on
    copy_format: str = ""  # their format (jpg, png, npy): part of a resized signature's cache key
    train_images: int = 0  # the train split's images: with run_epochs, the user's run a probe is priced against
    run_epochs: int = defaults.EPOCHS

    @property
    def run_images(self) -> int:
        """Images the user's whole run trains (``--epochs`` x the train split)."""
        return self.run_epochs * self.train_images

    def data_yaml(self, knobs: Knobs) -> str:
        """The data.yaml a probe of ``knobs`` trains on: the original, or the copy at its imgsz."""
        if knobs.data != "resized":
            return self.data
        for imgsz, yaml in self.copies:
            if imgsz == knobs.imgsz:
                return yaml
        raise UsageError(f"no prepared copy at imgsz={knobs.imgsz} to probe data=resized on; run `speedopt prepare`")
