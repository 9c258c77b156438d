"""ZeroOptimizer: ZeRO-2 over any ``torch.optim`` optimizer.

Example (under ``torchrun``)::

    dist.init_process_group()
    model = MyModel().to(device).half()
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=3e-4), bucket_size=25_000_000)
    for x, y in loader:
        opt.backward(loss_fn(model(x), y))   # scaled backward; buckets reduce as they fill
        opt.step()                            # fp32 shard step, then parameters all-gathered
        opt.zero_grad()

Gradients are reduced as they are produced and then dropped: after ``backward`` the parameters'
``.grad`` is ``None`` and this rank holds only its reduced shard. A parameter that gets no
gradient in a step counts as a zero gradient (as in DeepSpeed and Megatron).
"""

from __future__ import annotations

import collections
import inspect

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.checks import check_params, check_same_on_all_ranks, optimizer_group_of
from tritonzero.collectives import all_gather
from tritonzero.launcher import CommLauncher
from tritonzero.layout import plan_buckets
from tritonzero.loss_scale import LossScalePolicy, LossScaler
from tritonzero.timeline import Timeline, marker

__all__ = ["ZeroOptimizer"]


class ZeroOptimizer(torch.optim.Optimizer):
    """Shard ``optimizer``'s state and the model's gradients over the process group (ZeRO-2).

    Args:
        model: its trainable parameters, on one device, fp32/fp16/bf16. They become views of
            per-bucket flat buffers, so move the model to its device before wrapping it.
        optimizer: a ``torch.optim`` optimizer over ``model.parameters()``; its class, param
            groups and hyperparameters are rebuilt over this rank's fp32 shard.
        bucket_size: elements per gradient bucket (a larger parameter gets a bucket alone).
        process_group: defaults to the world group, or one rank without a process group.
        reduce_dtype: dtype of the reduce-scatter; defaults to the parameter dtype. fp16
            buckets keep the loss scale through the sum (no underflow), others are unscaled first.
        loss_scale: a ``LossScalePolicy`` or a fixed float; defaults to DeepSpeed's dynamic
            policy when any parameter is fp16, else no scaling.
        max_buckets_in_flight: back-pressure bound; the compute stream waits for the oldest
            bucket only when this many have been launched and not waited on.
        high_priority_comm: on NCCL, run the comm stream and the reduce-scatters (on a
            communicator of their own over the same ranks) at high stream priority, so their
            blocks are scheduled ahead of queued compute blocks instead of after them.
        trace: record a per-bucket CUDA-event timeline in ``opt.timeline`` (see timeline.py).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        bucket_size: int = 25_000_000,
        *,
        process_group: dist.ProcessGroup | None = None,
        reduce_dtype: torch.dtype | None = None,
        loss_scale: LossScalePolicy | float | None = None,
        max_buckets_in_flight: int = 32,
        high_priority_comm: bool = True,
        trace: bool = False,
    ):
        if process_group is None and dist.is_available() and dist.is_initialized():
            process_group = dist.group.WORLD
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group) if process_group is not None else 1
        self.rank = dist.get_rank(process_group) if process_group is not None else 0

        params = [p for p in model.parameters() if p.requires_grad]
        device = check_params(params)
        groups = optimizer_group_of(optimizer, params)
        layouts = plan_buckets(params, groups, bucket_size, self.world_size)
        check_same_on_all_ranks(
            repr([(tuple(p.shape), p.dtype, g) for p, g in zip(params, groups)] + [bucket_size]), process_group, device
        )

        self.buckets = [
            Bucket(i, layout, params, self.rank, reduce_dtype or layout.dtype, device) for i, layout in enumerate(layouts)
        ]
        self._slot_of = {id(p): (b, i) for b in self.buckets for i, p in enumerate(b.params)}
        cuda = device.type == "cuda"
        self._launcher = CommLauncher(device, torch.cuda.Stream(device, priority=-1 if high_priority_comm else 0) if cuda else None)
        self._grad_group = process_group
        if cuda and high_priority_comm and process_group is not None and dist.get_backend(process_group) == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options.is_high_priority_stream = True
            self._grad_group = dist.new_group(
                dist.get_process_group_ranks(process_group), backend="nccl", pg_options=options, use_local_synchronization=True
            )
        self._flag = torch.zeros(1, dtype=torch.int32, device=device)  # set by prep kernels on non-finite values
        self._in_flight: collections.deque[Bucket] = collections.deque()  # launched, maybe unfinished
        self._callback_queued = False
        self.max_buckets_in_flight = max_buckets_in_flight
        if trace and device.type != "cuda":
            raise ValueError("tritonzero: trace=True records CUDA events and needs CUDA parameters")
        self.timeline = Timeline() if trace else None

        if loss_scale is None and any(p.dtype == torch.float16 for p in params):
            loss_scale = LossScalePolicy()
        if isinstance(loss_scale, (int, float)):
            loss_scale = LossScalePolicy(init_scale=float(loss_scale), dynamic=False)
        self.scaler = LossScaler(loss_scale) if loss_scale is not None else None

        inner_groups = []
        for gi, group in enumerate(optimizer.param_groups):
            hyper = {k: v for k, v in group.items() if k != "params"}
            inner_groups.append({**hyper, "params": [b.master for b in self.buckets if b.layout.group == gi]})
        self.inner = _rebuild(optimizer, inner_groups)
        # Share (not copy) the inner optimizer's groups and state, so lr schedulers and user code
        # that edit ``opt.param_groups`` reach the optimizer that steps.
        super().__init__(self.inner.param_groups, self.inner.defaults)
        self.param_groups = self.inner.param_groups
        self.state = self.inner.state

        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in params]

    # ------------------------------------------------------------------ backward side
    @property
    def loss_scale(self) -> float:
        """The current loss scale (1.0 without scaling)."""
        return self.scaler.scale if self.scaler is not None else 1.0

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()`` with the loss scale applied; buckets reduce as they fill."""
        (loss * self.loss_scale if self.scaler is not None else loss).backward()

    def _on_grad(self, param: torch.Tensor) -> None:
        grad = param.grad
        if grad.is_sparse:
            raise RuntimeError("tritonzero: sparse gradients are not supported (e.g. nn.Embedding(sparse=True))")
        if not self._callback_queued:
            # Flushes buckets left incomplete by parameters that got no gradient this backward.
            torch.autograd.Variable._execution_engine.queue_callback(self._launch_remaining)
            self._callback_queued = True
        bucket, slot = self._slot_of[id(param)]
        param.grad = None  # the bucket holds it until the prep kernel has read it
        if bucket.add_grad(slot, grad):
            self._launch(bucket)

    def _factors(self, bucket: Bucket) -> tuple[float, float]:
        """(pre, post): prep multiplies by ``pre`` before the sum; the step unscales by ``post``.

        fp16 sums keep the loss scale (unscaled fp16 gradients near 1e-7 would underflow) and
        unscale the fp32 shard after the sum; other dtypes have the range to unscale up front.
        """
        scale = self.loss_scale
        if bucket.reduce_dtype == torch.float16:
            return 1.0 / self.world_size, 1.0 / scale
        return 1.0 / (self.world_size * scale), 1.0

    def _launch(self, bucket: Bucket) -> None:
        # Buckets finish in launch order on the comm stream: retire the finished ones.
        while self._in_flight and self._in_flight[0].poll():
            self._in_flight.popleft()
        if len(self._in_flight) >= self.max_buckets_in_flight:
            # Back-pressure: the only place where compute may wait on comm during backward.
            oldest = self._in_flight.popleft()
            oldest.issued.wait()
            oldest.wait()
        bucket.mark_ready(self.timeline)
        factor = self._factors(bucket)[0]
        self._launcher.submit(lambda: bucket.issue(factor, self._flag, self._grad_group, self.timeline))
        self._in_flight.append(bucket)

    def _launch_remaining(self) -> None:
        self._callback_queued = False
        for bucket in self.buckets:
            if not bucket.launched:
                self._launch(bucket)

    def finish_grad_sync(self) -> None:
        """Make the current stream wait for every bucket's reduce-scatter (no host sync on CUDA)."""
        self._launch_remaining()
        self._launcher.drain()  # host waits for the comm thread to *issue* the work, not for the GPU
        for bucket in self.buckets:
            bucket.wait()
        self._in_flight.clear()

    # ------------------------------------------------------------------ step side
    @torch.no_grad()
    def step(self, closure=None):
        """Step this rank's fp32 shard and all-gather the parameters; skipped on every rank when
        any rank saw a non-finite gradient (the loss scale then drops)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.finish_grad_sync()
        mark = marker(self.timeline)
        mark("compute", "step start")
        found_inf = self._flag.float()
        by_post: dict[float, list[torch.Tensor]] = {}
        for b in self.buckets:
            b.master.grad = b.grad_shard if b.grad_shard.dtype == torch.float32 else b.grad_shard.float()
            by_post.setdefault(self._factors(b)[1], []).append(b.master.grad)
        for post, grads in by_post.items():
            # One fused pass: unscale the shard and catch overflow in the sum itself.
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.full_like(found_inf, post))
        if self.world_size > 1:
            dist.all_reduce(found_inf, op=dist.ReduceOp.MAX, group=self.process_group)
        overflow = bool(found_inf.item())  # the step's one host sync
        if self.scaler is not None:
            self.scaler.update(overflow)
        if not overflow:
            self.inner.step()
        for b in self.buckets:
            b.master.grad = None
        if not overflow:
            mark("compute", "all-gather start")
            self._gather_params()
            mark("compute", "all-gather end")
        mark("compute", "step end")
        if self.timeline is not None:
            self.timeline.new_step()
        self._reset()
        return loss

    def _gather_params(self) -> None:
        works = []
        for b in self.buckets:
            if b.master is not b.param_shard:
                b.param_shard.copy_(b.master)
            if self.world_size > 1:
                works.append(all_gather(b.param_buffer, b.param_shard, self.process_group))
        for work in works:  # NCCL: the current stream waits, not the host
            work.wait()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop this step's gradients: waits for reductions in flight, then resets every bucket."""
        self._launcher.drain()
        for bucket in self.buckets:
            bucket.wait()
        self._in_flight.clear()
        self._reset()

    def _reset(self) -> None:
        self._callback_queued = False  # a backward that raised never ran its queued callback
        for b in self.buckets:
            b.reset()
        self._flag.zero_()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """This rank's shard: the inner optimizer's state dict plus the loss scaler's state."""
        state = {"optimizer": self.inner.state_dict()}
        if self.scaler is not None:
            state["loss_scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.inner.load_state_dict(state_dict["optimizer"])
        self.param_groups = self.inner.param_groups
        self.state = self.inner.state
        if self.scaler is not None and "loss_scaler" in state_dict:
            self.scaler.load_state_dict(state_dict["loss_scaler"])


def _rebuild(optimizer: torch.optim.Optimizer, groups: list[dict]) -> torch.optim.Optimizer:
    """The same optimizer class and defaults over new param groups.

    ``defaults`` can hold keys the constructor does not take (AdamW's ``decoupled_weight_decay``);
    those still reach every group through the group dicts copied from the original.
    """
    cls = type(optimizer)
    accepted = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    defaults = {k: v for k, v in optimizer.defaults.items() if takes_any or k in accepted}
    return cls(groups, **defaults)
