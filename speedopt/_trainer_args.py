"""Knobs spelled as the trainers' own arguments: the model value, and the classic ``train.py`` flags.

Below both sides that need them: :mod:`speedopt.command` prints them in a command a person pastes, and the
engines hand the very same values to the trainer inside a trial (the classic engine runs ``train.py``'s own
parser on these flags), so a trial runs what the printed command will. Nothing here imports an engine or
the command module: the engines sit below :mod:`speedopt.command` and import nothing from it.
"""

from __future__ import annotations

from speedopt.knobs import KNOBS, MODEL_SCALES, Knobs


def model_argument(model: str) -> str:
    """The trainer's model value: ``yolov5s`` -> ``yolov5s.yaml`` (built locally, never downloaded)."""
    return f"{model}.yaml" if model in MODEL_SCALES else model


def pretrained(knobs: Knobs, weights: str | None) -> str | None:
    """The checkpoint a run starts from besides its model: none when the model is itself a checkpoint."""
    return weights if weights and not knobs.model.endswith(".pt") else None


def train_py_args(
    data: str, knobs: Knobs, device: str | None = None, epochs: int | None = None, weights: str | None = None
) -> list[str]:
    """The classic ``train.py`` flags for these knobs, each its registry entry's :attr:`~speedopt.knobs.Knob.train_py`
    (no AMP flag: train.py has none).

    A built-in scale trains from scratch (``--weights '' --cfg yolov5s.yaml``, built locally), or from
    ``weights`` (``--weights FILE --cfg yolov5s.yaml``: train.py builds the cfg and loads what fits); a
    ``.pt`` is ``--weights FILE``; another ``.yaml`` is ``--cfg FILE``.
    """
    start = pretrained(knobs, weights) or ""
    if knobs.model in MODEL_SCALES:
        model = ["--weights", start, "--cfg", f"{knobs.model}.yaml"]
    elif knobs.model.endswith(".pt"):
        model = ["--weights", knobs.model]
    else:
        model = ["--weights", start, "--cfg", knobs.model]
    parts = ["--data", data, *model]
    for knob in KNOBS.values():  # the registry's train.py flags, in Knobs field order
        value = getattr(knobs, knob.name)
        if knob.train_py is not None and value != "none":  # cache none is no flag: train.py caches nothing without --cache
            parts += [knob.train_py, str(value)]
    if epochs:
        parts += ["--epochs", str(epochs)]
    if device:
        parts += ["--device", device]
    return parts
