"""Where the dashboard could not listen is one UsageError naming the fix, before it starts."""

import socket

import pytest

from speedopt.errors import UsageError
from speedopt.reporting import check_address
from tests.conftest import free_port


@pytest.mark.parametrize("port", [0, -1, 65536, 70000])
def test_port_out_of_range(port):
    with pytest.raises(UsageError, match="between 1 and 65535"):
        check_address("127.0.0.1", port)


def test_port_in_use():
    check_address("127.0.0.1", free_port())  # a free one passes
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(UsageError, match="already in use"):
            check_address("127.0.0.1", busy.getsockname()[1])


@pytest.mark.parametrize("host", ["not a host", "8.8.8.8", "x" * 300])
def test_bad_host(host):
    with pytest.raises(UsageError, match="--host") as info:
        check_address(host, free_port())
    assert len(str(info.value)) < 300
