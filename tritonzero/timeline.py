"""A timeline of compute vs comm per step, from CUDA events (no host sync until export).

``ZeroOptimizer(..., trace=True)`` records, per bucket, when its gradients were ready (compute
stream), when its prep kernel started and ended and when its reduce-scatter finished (comm
stream), plus the step and its all-gather. Events are only read when exported::

    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters()), trace=True)
    ...train a few steps...
    opt.timeline.export_chrome("trace.json")   # open in Perfetto / chrome://tracing
    opt.timeline.plot("timeline.png")           # needs matplotlib

Exposed communication of a step is the time from its last "grads ready" event to the end of its
last reduce-scatter: gradient sync that backward compute did not hide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch

__all__ = ["Timeline", "Span", "marker"]


@dataclass(frozen=True)
class Span:
    step: int
    lane: str  # "compute" or "comm"
    name: str
    start_ms: float
    end_ms: float


class Timeline:
    """CUDA events of the last ``max_steps`` steps; times are ms since the first kept step began."""

    def __init__(self, max_steps: int = 8):
        self.max_steps = max_steps
        self._steps: list[list[tuple[str, str, torch.cuda.Event]]] = []

    def mark(self, lane: str, name: str, stream: torch.cuda.Stream | None = None) -> torch.cuda.Event:
        """Record an event named ``name`` on ``stream`` (default: current) now in stream order."""
        if not self._steps:
            self.new_step()
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        self._steps[-1].append((lane, name, event))
        return event

    def new_step(self) -> None:
        self._steps.append([])
        del self._steps[: -self.max_steps]
        self.mark("compute", "step begins")

    def spans(self) -> list[Span]:
        """Resolve every event (this synchronizes) into spans: pairs named "X start"/"X end"."""
        if not self._steps:
            return []
        origin = self._steps[0][0][2]
        out = []
        for step, events in enumerate(self._steps):
            opened: dict[tuple[str, str], float] = {}
            for lane, name, event in events:
                # Each event: the last of a step on one stream need not be the last on another
                # (an overlapped all-gather), and elapsed_time raises on an event not yet reached.
                event.synchronize()
                t = origin.elapsed_time(event)
                if name.endswith(" start"):
                    opened[lane, name[: -len(" start")]] = t
                elif name.endswith(" end") and (lane, name[: -len(" end")]) in opened:
                    out.append(Span(step, lane, name[: -len(" end")], opened.pop((lane, name[: -len(" end")])), t))
                else:
                    out.append(Span(step, lane, name, t, t))
        return out

    def exposed_comm_ms(self) -> list[float]:
        """Per step: end of the last reduce-scatter minus the last "grads ready" event."""
        return list(_exposed_by_step(self.spans()).values())

    def export_chrome(self, path: str) -> None:
        """Chrome trace-event JSON (Perfetto opens it): one track per stream, times in µs."""
        tids = {"compute": 1, "comm": 2}
        events = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": t, "args": {"name": f"{lane} stream"}} for lane, t in tids.items()]
        for s in self.spans():
            common = {"name": s.name, "pid": 0, "tid": tids.get(s.lane, 3), "ts": s.start_ms * 1e3, "args": {"step": s.step}}
            if s.end_ms > s.start_ms:
                events.append({**common, "ph": "X", "dur": (s.end_ms - s.start_ms) * 1e3})
            else:
                events.append({**common, "ph": "i", "s": "t"})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def plot(self, path: str, title: str = "") -> None:
        """PNG of the compute and comm lanes with each step's exposed communication written on."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        spans = self.spans()
        fig, ax = plt.subplots(figsize=(14, 3.2))
        colors = {"prep": "tab:orange", "reduce-scatter": "tab:red", "step": "tab:green", "all-gather": "tab:purple"}
        for s in spans:
            y = 1 if s.lane == "compute" else 0
            kind = next((k for k in colors if s.name.startswith(k)), None)  # "all-gather c0" -> "all-gather"
            if s.end_ms > s.start_ms:
                ax.broken_barh([(s.start_ms, s.end_ms - s.start_ms)], (y - 0.35, 0.7), color=colors.get(kind, "tab:blue"), alpha=0.8)
            elif s.name.startswith("grads ready"):
                ax.plot([s.start_ms] * 2, [y - 0.35, y + 0.35], color="tab:blue", lw=0.6)
        ends = {}
        for s in spans:
            ends[s.step] = max(ends.get(s.step, 0.0), s.end_ms)
        for step, exposed in _exposed_by_step(spans).items():
            # Two rows of labels, so those of short neighbouring steps do not run into each other.
            ax.text(ends[step], 1.45 + 0.25 * (step % 2), f"step {step}: {exposed:.2f} ms exposed", ha="right", fontsize=7)
        ax.set_yticks([0, 1], ["comm stream", "compute stream"])
        ax.set_ylim(-0.6, 2.0)
        ax.set_xlabel("ms")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
        ax.legend(handles, list(colors), loc="lower right", fontsize=7, ncol=4)
        ax.set_title(title or "tritonzero: gradient sync timeline (blue ticks: a bucket's gradients ready)")
        fig.tight_layout()
        fig.savefig(path, dpi=130)
        plt.close(fig)


def _exposed_by_step(spans: list[Span]) -> dict[int, float]:
    """Steps with a reduce-scatter -> its end minus the step's last "grads ready" event, in ms."""
    per_step: dict[int, tuple[float, float]] = {}
    for s in spans:
        ready, done = per_step.get(s.step, (0.0, 0.0))
        if s.name.startswith("grads ready"):
            ready = max(ready, s.end_ms)
        if s.name.startswith("reduce-scatter"):
            done = max(done, s.end_ms)
        per_step[s.step] = (ready, done)
    return {step: max(0.0, done - ready) for step, (ready, done) in per_step.items() if done}


def marker(timeline: Timeline | None):
    """``timeline.mark``, or a no-op when tracing is off."""
    return timeline.mark if timeline is not None else _skip


def _skip(*args, **kwargs) -> None:
    return None
