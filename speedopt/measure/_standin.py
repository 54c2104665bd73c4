"""A stand-in rank: ``python -m speedopt.measure._standin WORKDIR --steps N --batch B`` under ``torch.distributed.run``.

Neither trainer runs DDP without CUDA, so the launcher (:mod:`speedopt.measure._launch`) is built and
tested with this small training loop on the ``gloo`` backend: it joins the process group the agent set
up (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` from ``torch.distributed.run``) with the
collective timeout of ``SPEEDOPT_PG_TIMEOUT_S``, wraps a tiny conv net in ``DistributedDataParallel``
(which all-reduces the gradients in every backward pass), trains ``--warmup`` + ``--steps`` steps on
random batches, times the ``--steps`` after the warm-up, and writes ``rank<R>.json`` (rank, images,
seconds, images_per_s) into WORKDIR. It dies with its agent (``SPEEDOPT_AGENT_PID``), as a trial
child dies with its runner.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from speedopt.isolation import die_with
from speedopt.measure._launch import AGENT_ENV, TIMEOUT_ENV

DEFAULT_TIMEOUT_S = 1800.0  # torch's default for gloo, when no timeout is passed


def _die_with_agent() -> None:
    """SIGKILL this rank's group when its agent goes: a SIGKILLed agent leaves no rank behind."""
    die_with(int(os.environ.get(AGENT_ENV) or os.getppid()), interval_s=0.2, name="speedopt-agent-watch")


def _write(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m speedopt.measure._standin")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--steps", type=int, default=10, help="measured steps")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured steps first")
    parser.add_argument("--batch", type=int, default=8, help="images per rank per step")
    parser.add_argument("--imgsz", type=int, default=32)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1, --warmup at least 0")
    _die_with_agent()

    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    timeout_s = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    _write(args.workdir / f"rank{rank}.started.json", {"rank": rank, "pid": os.getpid()})
    torch.manual_seed(rank)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4),
    )
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(args.batch, 3, args.imgsz, args.imgsz)
    targets = torch.randn(args.batch, 4)
    started = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(images), targets)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
    seconds = time.perf_counter() - started
    done = args.batch * args.steps
    _write(args.workdir / f"rank{rank}.json", {
        "rank": rank, "world_size": world, "images": done, "seconds": seconds,
        "images_per_s": done / seconds if seconds > 0 else 0.0, "pg_timeout_s": timeout_s,
    })
    dist.barrier()  # no rank tears down gloo while another still talks to it
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # at once: no C++ destructor of a gloo thread gets to abort the exit


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
