"""A background thread that issues the comm stream's work, so backward never waits on Python.

Backward's own thread (autograd's device thread) only records a bucket's "grads ready" event
and enqueues the bucket; this thread then issues the prep kernel and the reduce-scatter. Each
costs tens of microseconds of host time in Python, which on the backward thread would delay the
launch of backward's own kernels: with small buckets backward becomes launch-bound. Here the two
run side by side; the GIL is released inside torch, Triton and NCCL launches.

Work runs in submission order (so every rank issues its collectives in the same order) on the
comm stream, which is this thread's current stream.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

import torch

__all__ = ["CommLauncher"]


class CommLauncher:
    """FIFO of callables run on one daemon thread whose current CUDA stream is ``comm_stream``."""

    def __init__(self, device: torch.device, comm_stream: torch.cuda.Stream | None):
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(device, comm_stream), name="tritonzero-comm", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        with self._idle:
            self._pending += 1
        self._queue.put(fn)

    def drain(self) -> None:
        """Block the host until every submitted callable has run; re-raise the first error."""
        with self._idle:
            while self._pending:
                self._idle.wait()
            error, self._error = self._error, None
        if error is not None:
            raise RuntimeError("tritonzero: issuing a bucket's gradient sync failed") from error

    def _run(self, device: torch.device, comm_stream: torch.cuda.Stream | None) -> None:
        if comm_stream is not None:
            torch.cuda.set_device(device)
            torch.cuda.set_stream(comm_stream)
        while True:
            fn = self._queue.get()
            try:
                if self._error is None:  # after a failure, skip the rest until drain reports it
                    fn()
            except BaseException as e:  # reported by drain() on the caller's thread
                self._error = e
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
