"""Timeline arithmetic on synthetic spans (recording needs CUDA events; see the GPU benchmark)."""

from __future__ import annotations

import pytest

from tritonzero.timeline import Span, Timeline


def _spans():
    return [
        # step 0: last gradients ready at 5.0, last reduce-scatter ends at 6.25 -> 1.25 ms exposed
        Span(0, "compute", "grads ready b1", 2.0, 2.0), Span(0, "compute", "grads ready b0", 5.0, 5.0),
        Span(0, "comm", "prep b1", 2.1, 2.2), Span(0, "comm", "reduce-scatter b1", 2.2, 4.0),
        Span(0, "comm", "prep b0", 5.1, 5.2), Span(0, "comm", "reduce-scatter b0", 5.2, 6.25),
        Span(0, "compute", "step", 6.3, 9.0), Span(0, "comm", "all-gather c0", 7.0, 8.0),
        # step 1: the reduce-scatter ends before the last gradients are ready -> nothing exposed
        Span(1, "compute", "grads ready b0", 14.0, 14.0), Span(1, "comm", "reduce-scatter b1", 12.0, 13.0),
    ]


def test_exposed_comm_per_step():
    timeline = Timeline()
    timeline.spans = _spans
    assert timeline.exposed_comm_ms() == pytest.approx([1.25, 0.0])


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    timeline = Timeline()
    timeline.spans = _spans
    timeline.plot(str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
