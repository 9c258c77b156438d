"""Run a function on N real processes joined by a real process group (gloo on CPU, NCCL on GPUs)."""

from __future__ import annotations

import faulthandler
import json
import os
import tempfile
import traceback
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def gpu_worlds(*sizes: int) -> list:
    """World sizes for ``pytest.mark.parametrize``, each skipped where fewer GPUs are present."""
    return [pytest.param(n, marks=pytest.mark.skipif(torch.cuda.device_count() < n, reason=f"needs {n} CUDA GPUs")) for n in sizes]


def _entry(rank: int, world_size: int, backend: str, tmp: str, fn, args) -> None:
    faulthandler.enable(all_threads=True)  # a crashing rank prints every thread's Python stack
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend, init_method=f"file://{tmp}/store", rank=rank, world_size=world_size, timeout=timedelta(seconds=120)
    )
    try:
        result = fn(*args)
        error = None
    except Exception:  # reported to the parent, which fails the test with it
        result, error = None, traceback.format_exc()
    with open(f"{tmp}/rank{rank}.json", "w") as f:
        json.dump({"result": result, "error": error}, f)
    if error is None:
        dist.barrier()  # no rank tears its connections down while a peer still uses them
    dist.destroy_process_group()
    # Skip interpreter teardown: gloo's static destructors at exit abort now and then
    # ("terminate called without an active exception") after all work is done and reported.
    os._exit(0)


def run_ranks(world_size: int, fn, *args, backend: str = "gloo") -> list:
    """``fn(*args)`` on every rank; returns each rank's (JSON-able) result, raising any rank's error.

    A rank that dies (a native crash: SIGABRT, SIGSEGV) fails the test with the signal's name.
    """
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_entry, args=(world_size, backend, tmp, fn, args), nprocs=world_size, start_method="spawn")
        outcomes = []
        for r in range(world_size):
            with open(f"{tmp}/rank{r}.json") as f:
                outcomes.append(json.load(f))
    errors = [f"rank {r}:\n{o['error']}" for r, o in enumerate(outcomes) if o["error"]]
    if errors:
        raise AssertionError("\n".join(errors))
    return [o["result"] for o in outcomes]
