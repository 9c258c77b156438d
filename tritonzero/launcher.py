"""A background thread that issues the comm stream's work, so backward never waits on Python.

Backward's own thread (autograd's device thread) only records a bucket's "grads ready" event
and enqueues the bucket; this thread then issues the prep kernel and the reduce-scatter. Each
costs tens of microseconds of host time in Python, which on the backward thread would delay the
launch of backward's own kernels: with small buckets backward becomes launch-bound. Here the two
run side by side; the GIL is released inside torch, Triton and NCCL launches.

Work runs in submission order (so every rank issues its collectives in the same order), with
the submitting optimizer's comm stream as the thread's current stream. Every optimizer of the
process on one device shares that device's thread.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

import torch

__all__ = ["CommLauncher"]

_ISSUE_FAILED = "tritonzero: issuing a bucket's gradient sync failed; call zero_grad() before the next step"


class _State:
    """What one launcher and the comm thread share: the count of its callables not yet run, its
    first error (kept, and its later callables skipped, until ``recover``), and whether a caller
    has been told of that error."""

    def __init__(self):
        self.idle = threading.Condition()
        self.pending = 0
        self.error: BaseException | None = None
        self.reported = False


class CommLauncher:
    """FIFO of callables run with ``comm_stream`` current, on the process's comm thread for
    ``device``.

    One daemon thread per device serves every launcher of the process, in submission order, and
    never ends; between callables it holds none. A callable's closure holds the buckets (every
    parameter's storage), and an optimizer dropped by its user must not stay reachable from the
    thread; nor may each optimizer built leave a thread behind. (Ending a per-optimizer thread
    once its launcher was collected was tried: the CPU equivalence tests then crashed in a
    native thread, SIGSEGV, in 2 of 13 runs, against 0 of 9 without it. That may have been
    gloo's coalesced all-gather, which crashed CPU runs about once in 14 until tritonzero
    stopped using it (RESULTS.md, section 5); not retried, as a shared thread needs no ending.)
    """

    def __init__(self, device: torch.device, comm_stream: torch.cuda.Stream | None):
        self._state = _State()
        self._stream = comm_stream
        self._queue = _comm_thread_queue(device)

    def submit(self, fn: Callable[[], None]) -> None:
        with self._state.idle:
            self._state.pending += 1
        self._queue.put((fn, self._state, self._stream))

    def wait_for(self, issued: threading.Event) -> None:
        """Block the host until a callable of this launcher, submitted earlier, sets ``issued``;
        raise this launcher's error instead if there is one. A failed callable never sets its
        event, and the ones after it are skipped: waiting on the event alone would never end
        (it did: backward hung under back-pressure)."""
        state = self._state
        with state.idle:  # every callable notifies under this lock once it has run (or failed)
            while not issued.is_set() and state.error is None and state.pending:
                state.idle.wait()
            self._raise_error()
        if not issued.is_set():
            raise RuntimeError("tritonzero: waited for a bucket whose gradient sync was never submitted")

    def drain(self) -> None:
        """Block the host until every callable submitted to the device's thread so far, by any
        launcher, has run; raise this launcher's error, at every call until ``recover``, so that
        no step goes on with a bucket that was never reduced.

        Every launcher's work, not only this one's: the caller's next collectives (a step's
        all-reduce and all-gathers) then come after every reduce-scatter queued before them,
        on every rank alike. Another optimizer over the same process group, whose backward ran
        after this one's, would otherwise still be issuing its reduce-scatters from the comm
        thread while this one steps, in an order that may differ between ranks: with gloo a
        collective mismatch (measured: an abort); NCCL too needs one order per communicator.
        """
        self._wait_idle()
        with self._state.idle:
            self._raise_error()

    def recover(self) -> None:
        """``drain``, then forget this launcher's error, so that its next callables run; raise
        the error here if no caller has been told of it yet (it would go unseen otherwise)."""
        self._wait_idle()
        state = self._state
        with state.idle:
            error, reported = state.error, state.reported
            state.error, state.reported = None, False
        if error is not None and not reported:
            raise RuntimeError(_ISSUE_FAILED) from error

    def _wait_idle(self) -> None:
        self.submit(_nothing)  # the queue is FIFO: once this has run, so has everything before it
        state = self._state
        with state.idle:
            while state.pending:
                state.idle.wait()

    def _raise_error(self) -> None:
        """With ``idle`` held: raise this launcher's error, if any, and note that it was reported."""
        state = self._state
        if state.error is not None:
            state.reported = True
            raise RuntimeError(_ISSUE_FAILED) from state.error


def _nothing() -> None:
    pass


_QUEUES: dict[torch.device, queue.SimpleQueue] = {}
_QUEUES_LOCK = threading.Lock()


def _comm_thread_queue(device: torch.device) -> queue.SimpleQueue:
    """The work queue of ``device``'s comm thread, started on first use."""
    with _QUEUES_LOCK:
        work = _QUEUES.get(device)
        if work is None:
            work = _QUEUES[device] = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(work, device), name=f"tritonzero-comm-{device}", daemon=True).start()
        return work


def _serve(work: queue.SimpleQueue, device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.set_device(device)
    current = None  # the stream made current last
    while True:
        fn, state, stream = work.get()
        try:
            if stream is not current:  # another launcher's stream: one switch, not one per callable
                torch.cuda.set_stream(stream)
                current = stream
            if state.error is None:  # after a failure, skip the launcher's rest until ``recover``
                fn()
        except BaseException as e:  # reported by drain() on the caller's thread
            state.error = e
        finally:
            fn = None  # the closure goes now, not when the next callable arrives
            with state.idle:
                state.pending -= 1
                state.idle.notify_all()
            state = None
