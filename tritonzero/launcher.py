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


class _State:
    """What the caller and the comm thread share: the count of callables not yet run, and the first error."""

    def __init__(self):
        self.idle = threading.Condition()
        self.pending = 0
        self.error: BaseException | None = None


class CommLauncher:
    """FIFO of callables run on one daemon thread whose current CUDA stream is ``comm_stream``.

    The thread never ends, so between callables it holds none: a callable's closure holds the
    buckets (every parameter's storage), and an optimizer dropped by its user must not stay
    reachable from it. (Ending the thread once the launcher is collected was tried: the CPU
    equivalence tests then crashed in a native thread, SIGSEGV, in 2 of 13 runs; with the thread
    left idle, none in 49. Not understood.) A dropped optimizer leaves only this idle thread.
    """

    def __init__(self, device: torch.device, comm_stream: torch.cuda.Stream | None):
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._state = _State()
        self._thread = threading.Thread(
            target=_serve, args=(self._queue, self._state, device, comm_stream), name="tritonzero-comm", daemon=True
        )
        self._thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        with self._state.idle:
            self._state.pending += 1
        self._queue.put(fn)

    def drain(self) -> None:
        """Block the host until every submitted callable has run; re-raise the first error."""
        state = self._state
        with state.idle:
            while state.pending:
                state.idle.wait()
            error, state.error = state.error, None
        if error is not None:
            raise RuntimeError("tritonzero: issuing a bucket's gradient sync failed") from error


def _serve(work: queue.SimpleQueue, state: _State, device: torch.device, comm_stream: torch.cuda.Stream | None) -> None:
    if comm_stream is not None:
        torch.cuda.set_device(device)
        torch.cuda.set_stream(comm_stream)
    while True:
        fn = work.get()
        try:
            if state.error is None:  # after a failure, skip the rest until drain reports it
                fn()
        except BaseException as e:  # reported by drain() on the caller's thread
            state.error = e
        finally:
            fn = None  # the closure goes now, not when the next callable arrives
            with state.idle:
                state.pending -= 1
                state.idle.notify_all()
