"""Reading a YAML file the user handed over (data.yaml, a --space file) with bounded memory.

``yaml.safe_load`` keeps aliases as shared objects, so a 413-byte "billion laughs" file loads in
microseconds and explodes later, when anything walks it (``str(names)``: gigabytes). Here a file is
refused, with one line, when it is larger than :data:`MAX_BYTES` or when its aliases would expand
it to more than :data:`MAX_EXPANDED` units (one per node plus one per scalar character): ordinary
files, with or without a few anchors, stay far below both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from speedopt.errors import UsageError

MAX_BYTES = 1 << 20  # 1 MiB: a data.yaml or space file is a few hundred bytes
MAX_EXPANDED = 2 * MAX_BYTES  # nodes + scalar characters once every alias is expanded
MAX_DEPTH = 100  # nested collections: a data.yaml or space file nests two or three deep


class _TooLarge(Exception):
    """Raised while measuring: the document expands past the budget (or refers to itself)."""


def _expanded_size(root: yaml.Node, budget: int) -> int:
    """The size of ``root`` with every alias expanded, computed once per distinct node (shared nodes
    are how aliases look after composing), raising :class:`_TooLarge` past ``budget`` or on a cycle."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _TooLarge("include one that refers to the node containing it")
        open_nodes.add(key)
        if isinstance(node, yaml.ScalarNode):
            total = 1 + len(str(node.value))
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        else:  # MappingNode: value is a list of (key, value) node pairs
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        open_nodes.discard(key)
        if total > budget:
            raise _TooLarge(f"would expand it to more than {budget:,} nodes and characters")
        sizes[key] = total
        return total

    return size(root)


class _TooDeep(Exception):
    """Raised while composing: collections nest deeper than :data:`MAX_DEPTH`."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that bounds the nesting while it composes (refused at once, not at the interpreter's
    recursion limit) and measures the composed document before building any Python object from it."""

    budget = MAX_EXPANDED
    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, self.budget)
        return node


def read_yaml(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_BYTES) -> Any:
    """The parsed content of the YAML file at ``path`` (``what`` names it in messages: "data.yaml").

    Raises :class:`UsageError` in one line for a missing or unreadable file, a file over ``max_bytes``,
    invalid YAML, or aliases that would expand past the budget.
    """
    file = Path(path)
    try:
        with open(file, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {file}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise UsageError(
            f"{what} {file} is larger than {max_bytes // 1024} KiB; speedopt reads YAML files up to that size: "
            "point it at the right file"
        )
    try:
        return yaml.load(raw.decode("utf-8", errors="replace"), Loader=_BoundedLoader)  # a SafeLoader subclass
    except (ValueError, OverflowError) as exc:  # a scalar the constructor cannot build: 5000-digit int, bad date
        why = str(exc).split(";")[0][:120]
        raise UsageError(f"{what} {file} holds a value YAML cannot read ({why}); fix the file") from None
    except (RecursionError, _TooDeep):
        raise UsageError(f"{what} {file} nests its YAML too deeply to read; flatten the file") from None
    except _TooLarge as exc:
        raise UsageError(
            f"{what} {file}: its YAML aliases {exc} (a 'billion laughs' file?); "
            "write the values out without aliases"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UsageError(f"{what} is not valid YAML{where}: {file}; fix the file or regenerate it") from None
