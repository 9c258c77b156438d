"""The device-side loss scaler follows DeepSpeed's dynamic policy, step by step."""

from __future__ import annotations

import random

import torch

from tritonzero.loss_scale import LossScalePolicy, LossScaler


def _deepspeed_reference(events, init, window, hysteresis, min_scale):
    """DeepSpeed's DynamicLossScaler.update_scale, transcribed (delayed_shift = hysteresis)."""
    scale, cur_hyst, last_overflow, it, out = init, hysteresis, -1, 0, []
    for overflow in events:
        if overflow:
            if hysteresis == 1 or cur_hyst == 1:
                scale = max(scale / 2, min_scale)
            else:
                cur_hyst -= 1
            last_overflow = it
        elif (it - last_overflow) % window == 0:
            scale *= 2
            cur_hyst = hysteresis
        it += 1
        out.append(scale)
    return out


def test_matches_deepspeed_policy():
    rng = random.Random()
    policy = LossScalePolicy(init_scale=2.0**10, window=5, hysteresis=2, min_scale=1.0)
    events = [rng.random() < 0.3 for _ in range(200)] + [True] * 15 + [False] * 12
    scaler = LossScaler(policy, torch.device("cpu"))
    got = []
    for overflow in events:
        scaler.update(torch.tensor([float(overflow)]))
        got.append(scaler.value)
    assert got == _deepspeed_reference(events, 2.0**10, 5, 2, 1.0)


def test_static_scale_never_moves():
    scaler = LossScaler(LossScalePolicy(init_scale=128.0, dynamic=False), torch.device("cpu"))
    for overflow in (True, True, False):
        scaler.update(torch.tensor([float(overflow)]))
    assert scaler.value == 128.0


def test_state_round_trip():
    a = LossScaler(LossScalePolicy(window=3), torch.device("cpu"))
    for overflow in (True, False, True, True):
        a.update(torch.tensor([float(overflow)]))
    b = LossScaler(LossScalePolicy(window=3), torch.device("cpu"))
    b.load_state_dict(a.state_dict())
    for overflow in (False, False, False, True):
        a.update(torch.tensor([float(overflow)]))
        b.update(torch.tensor([float(overflow)]))
        assert a.value == b.value
