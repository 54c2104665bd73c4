"""The one mapping from an exception to a trial status."""

import pytest

from speedopt.status import Status, TrialRejected, is_oom, status_of


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError (torch is not imported here)."""


@pytest.mark.parametrize(
    "exc, status",
    [
        (MemoryError(), Status.OOM),
        (OutOfMemoryError("CUDA error"), Status.OOM),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), Status.OOM),
        (RuntimeError("shape mismatch"), Status.ERROR),
        (KeyboardInterrupt(), Status.ERROR),
        (TrialRejected(Status.INFEASIBLE, "cache=ram dropped"), Status.INFEASIBLE),
        (TrialRejected(Status.OOM, "batch halved"), Status.OOM),
    ],
)
def test_status_of(exc, status):
    assert status_of(exc)[0] is status


def test_message_is_one_line_with_the_type():
    status, message = status_of(ValueError("first line\nsecond line"))
    assert status is Status.ERROR and message == "ValueError: first line"
    assert status_of(TrialRejected(Status.INFEASIBLE, "why"))[1] == "why"


def test_is_oom_is_not_fooled_by_other_errors():
    assert not is_oom(RuntimeError("memory layout"))
    assert is_oom(MemoryError())
