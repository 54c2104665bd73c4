"""A study's protocol as stored: it reads back as it was written, and its closed sets stay closed."""

import pytest

from speedopt.errors import UsageError
from speedopt.search import SearchConfig, plan
from speedopt.study import StudyProtocol
from speedopt.study.record_types import DataCopy


def _attrs(demo_yaml):
    return plan(SearchConfig(data=str(demo_yaml), device="cpu", quality="off", ceiling_rank="on")).protocol.to_attrs()


def test_a_protocol_reads_back_as_it_was_written(demo_yaml):
    attrs = _attrs(demo_yaml)
    again = StudyProtocol.from_attrs(attrs, "s")
    assert again.to_attrs() == attrs and again.engine == "ultralytics" and again.ceiling_rank == "on"


@pytest.mark.parametrize("key, value", [("engine", "darknet"), ("ceiling_rank", "sometimes"), ("engine", None)])
def test_a_stored_value_outside_its_closed_set_is_refused_in_one_line(demo_yaml, key, value):
    attrs = {**_attrs(demo_yaml), key: value}
    with pytest.raises(UsageError, match=f"study 's' stores {key} {value!r}, not one of") as refused:
        StudyProtocol.from_attrs(attrs, "s")
    assert "\n" not in str(refused.value)


def test_a_copy_of_an_unknown_format_is_refused():
    copy = {"imgsz": 64, "yaml": "/x/data.yaml", "format": "webp", "quality": 100, "seconds": 1.0, "bytes": 1, "source_bytes": 2}
    with pytest.raises(UsageError, match="copy format 'webp', not one of jpg, png, npy"):
        DataCopy.from_dict(copy)
    assert DataCopy.from_dict({**copy, "format": "png"}).lossless
