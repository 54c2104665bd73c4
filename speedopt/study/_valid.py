"""Every record a study stores is read back into its frozen dataclass; an imported study's are also held to their
declared types and bounds before anything of it is stored (issue 54).

Optuna stores JSON, and a reader builds a record with ``cls(**values)``: nothing checks that ``trial`` holds a whole
number, that ``ceilings`` maps names to ceilings, or that ``repeats`` is a count a report can loop over. A record from
an export is data from outside; :func:`record_problem` walks a record against its dataclass's type hints (numbers,
text, flags, enums, literals, nested records, tuples, lists and mappings of them) and :data:`BOUNDS`, and says where
the first value that does not fit sits. Import (:func:`speedopt.study.import_study`) refuses such a study whole.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from speedopt.knobs import shown

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

#: The largest value a count may hold where a reader loops over it or sizes a list by it; any other whole number
#: is bounded by :data:`MAX_INT`, and every sequence and mapping by :data:`MAX_ITEMS` entries.
BOUNDS = {"repeats": 1_000, "rounds": 1_000, "steps": 1_000_000, "max_steps": 1_000_000, "warmup": 1_000_000,
          "epochs": 1_000_000, "trial": 10_000_000, "seeds": 1_000, "confirm_seeds": 1_000}
MAX_INT = 2**53  # what a JSON number holds exactly
MAX_ITEMS = 1_000_000


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def record_problem(record: Any, where: str) -> str | None:
    """Where the first field of ``record`` (a dataclass instance) holds a value its type or bound does not allow, as
    ``where.field is 'x', not a whole number``; None when every field fits."""
    hints = _hints(type(record))
    for field in dataclasses.fields(record):
        problem = _problem(getattr(record, field.name), hints[field.name], f"{where}.{field.name}", field.name)
        if problem is not None:
            return problem
    return None


def _problem(value: Any, hint: Any, where: str, name: str) -> str | None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        tried = [_problem(value, option, where, name) for option in args]
        return None if any(t is None for t in tried) else next(t for t in tried if t is not None)
    if hint is type(None):
        return None if value is None else f"{where} is {shown(value, 40)}, not empty"
    if origin is typing.Literal:
        return None if value in args else f"{where} is {shown(value, 40)}, not one of {', '.join(map(repr, args))}"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return record_problem(value, where) if isinstance(value, hint) else f"{where} is {shown(value, 40)}, not a record"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return None if isinstance(value, hint) else f"{where} is {shown(value, 40)}, not one of its names"
    if origin in (tuple, list, dict) or origin is Mapping:
        return _container(value, origin, args, where, name)
    return _scalar(value, hint, where, name)


def _container(value: Any, origin: Any, args: tuple[Any, ...], where: str, name: str) -> str | None:
    kind = {tuple: (tuple, list), list: (list, tuple)}.get(origin, (dict, Mapping))
    if not isinstance(value, kind):
        return f"{where} is {shown(value, 40)}, not a {'mapping' if origin in (dict, Mapping) else 'list'}"
    if len(value) > MAX_ITEMS:
        return f"{where} holds {len(value)} entries, more than {MAX_ITEMS}"
    if origin in (dict, Mapping):
        key_hint, item_hint = args or (Any, Any)
        pairs = [(_problem(k, key_hint, f"{where} key", name), _problem(v, item_hint, f"{where}[{shown(k, 20)}]", name))
                 for k, v in value.items()]
        return next((p for pair in pairs for p in pair if p is not None), None)
    if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
        if len(value) != len(args):
            return f"{where} holds {len(value)} values, not {len(args)}"
        items = list(zip(value, args, strict=True))
    else:
        items = [(v, args[0] if args else Any) for v in value]
    return next((p for i, (v, h) in enumerate(items) if (p := _problem(v, h, f"{where}[{i}]", name)) is not None), None)


def _scalar(value: Any, hint: Any, where: str, name: str) -> str | None:
    if hint is bool:
        return None if isinstance(value, bool) else f"{where} is {shown(value, 40)}, not true or false"
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{where} is {shown(value, 40)}, not a whole number"
        most = BOUNDS.get(name, MAX_INT)
        return None if -MAX_INT <= value <= most else f"{where} is {value}, beyond its bound {most}"
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and abs(value) <= 1e300
        return None if ok else f"{where} is {shown(value, 40)}, not a number"
    if hint is str:
        return None if isinstance(value, str) else f"{where} is {shown(value, 40)}, not text"
    if isinstance(hint, type):
        return None if isinstance(value, hint) else f"{where} is {shown(value, 40)}, not a {hint.__name__}"
    return None  # a hint this walk does not know: its reader decides


def import_problem(study: optuna.Study, trials: Iterable[FrozenTrial]) -> str | None:
    """Where an exported study holds a record its reader cannot build, or one whose values do not fit its types and
    bounds (:func:`record_problem`), as part of one line; None when every record fits. Every study record a reader
    builds is read, and every complete trial's record."""
    from speedopt.study import _schema as schema
    from speedopt.study._record import TrialRecord

    readers: list[tuple[str, Callable[[], Any]]] = [
        ("protocol", lambda: schema.read_protocol(study)), (schema.LABELS, lambda: schema.read_labels(study)),
        (schema.CEILINGS, lambda: schema.read_ceilings(study)), (schema.RANKING, lambda: schema.read_ranking(study)),
        (schema.BILL, lambda: schema.read_bill(study)), (schema.FINALS, lambda: schema.read_finals(study)),
        (schema.ABLATION, lambda: schema.read_ablation(study)), (schema.COMPILE, lambda: schema.read_compile(study)),
        (schema.CEILINGS_FOR, lambda: _typed(schema.read_ceilings_for(study), dict[str, int | None])),
        (schema.STOPPED, lambda: _typed(schema.read_stopped(study), str | None)),
    ]
    for name, read in readers:
        if name not in study.user_attrs and name != "protocol":
            continue
        problem = _read_problem(read, f"its {name} record")
        if problem is not None:
            return problem
    for trial in trials:
        problem = _read_problem(functools.partial(TrialRecord.from_frozen, trial), f"trial {trial.number}'s record")
        if problem is not None:
            return problem
    return None


def _typed(value: Any, hint: Any) -> Any:
    problem = _problem(value, hint, "it", "")
    if problem is not None:
        raise ValueError(problem)
    return None


def _read_problem(read: Callable[[], Any], what: str) -> str | None:
    """Why ``read()`` fails, or where its record (or the records it returns) breaks its types; None when it fits."""
    try:
        built = read()
    except Exception as exc:  # a reader meets a value of another shape in many ways: each is the export's
        return f"{what} cannot be read ({shown(str(exc), 80)})"
    records = list(built.values()) if isinstance(built, dict) else list(built) if isinstance(built, list | tuple) else [built]
    for record in records:
        if dataclasses.is_dataclass(record) and not isinstance(record, type):
            problem = record_problem(record, what)
            if problem is not None:
                return problem
    return None
