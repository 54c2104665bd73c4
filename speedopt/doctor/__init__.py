"""The pre-flight (``speedopt doctor``): what makes training slow or wrong before any trial runs.

Each check is one :class:`Check` (ok, warn or fail, with the figures found and what to do):
torch's CUDA build against the driver, the GPUs torch sees, the device, cores and workers, the CPUs
a loader worker may run on, ``/dev/shm`` (for the loader's batches, and for the RAM cache), RAM for
cache=ram, the dataset's filesystem and measured read speed, image size against imgsz, and online loggers. :func:`refuse_fatal` is what ``speedopt search`` runs first.
"""

from speedopt.doctor._check import Check, Diagnosis, Level
from speedopt.doctor._disk import Mount, filesystem, mount_of, read_speed
from speedopt.doctor._gpu import fatal
from speedopt.doctor._host import ShmUsage, affinity, shm, shm_cache, shm_need
from speedopt.doctor._run import DoctorOptions, diagnose, refuse_fatal

__all__ = [
    "Check",
    "Diagnosis",
    "DoctorOptions",
    "Level",
    "Mount",
    "ShmUsage",
    "affinity",
    "diagnose",
    "fatal",
    "filesystem",
    "mount_of",
    "read_speed",
    "refuse_fatal",
    "shm",
    "shm_cache",
    "shm_need",
]
