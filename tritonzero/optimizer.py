"""ZeroOptimizer: ZeRO-2 over any ``torch.optim`` optimizer.

Example (under ``torchrun``)::

    dist.init_process_group()
    model = MyModel().to(device).half()
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=3e-4), bucket_size=25_000_000)
    for x, y in loader:
        opt.backward(loss_fn(model(x), y))   # scaled backward; buckets reduce as they fill
        opt.clip_grad_norm_(1.0)              # optional: global norm over every rank's shard
        opt.step()                            # fp32 shard step, then parameters all-gathered
        opt.zero_grad()

Gradients are reduced as they are produced and then dropped: after ``backward`` the parameters'
``.grad`` is ``None`` and this rank holds only its reduced shard. A parameter that gets no
gradient in a step counts as a zero gradient (as in DeepSpeed and Megatron).
"""

from __future__ import annotations

import contextlib
import inspect

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.checks import check_params, check_same_on_all_ranks, optimizer_group_of
from tritonzero.copy_engine import DIRECT_MIN_ELEMENTS, TRANSPORTS, CopyEngineReduce
from tritonzero.grad_sync import GradSync
from tritonzero.launcher import CommLauncher
from tritonzero.layout import plan_buckets
from tritonzero.loss_scale import LossScalePolicy, LossScaler
from tritonzero.master_grads import MasterGrads
from tritonzero.param_gather import ParamGather
from tritonzero.timeline import Timeline, marker

__all__ = ["ZeroOptimizer"]


class ZeroOptimizer(torch.optim.Optimizer):
    """Shard ``optimizer``'s state and the model's gradients over the process group (ZeRO-2).

    Args:
        model: its trainable parameters, on one device, fp32/fp16/bf16. They become views of
            per-bucket flat buffers, so move the model to its device before wrapping it.
        optimizer: a ``torch.optim`` optimizer over ``model.parameters()``; its class, param
            groups and hyperparameters are rebuilt over this rank's fp32 shard. With
            ``fused=True`` (Adam, AdamW, SGD) a step never syncs with the host.
        bucket_size: elements per gradient bucket at most, except that a larger parameter
            gets a bucket of its own (the small gradients around it keep filling the open one).
            A gradient that fills its bucket exactly is reduce-scattered from itself, with no
            bucket buffer (on NCCL with a power-of-two world and no loss scale to divide out,
            with no prep kernel either: the collective averages it).
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
        step_chunks: the step runs over this many groups of buckets (forward order, about equal
            sizes), and each group's parameter all-gather runs beside the next group's step, so
            only the last one is left after it (param_gather.py). 1: step all, then gather.
        overlap_param_gather: off by default. Leave the parameter all-gathers running after
            ``step`` and make the forward pre-hook of each module that owns parameters wait for
            its own chunk (param_gather.py), hiding the gathers behind the next forward; more
            ``step_chunks`` let forward start sooner. A parameter read before its owning
            module's forward runs (shared across modules, read by hand) needs
            ``opt.finish_param_sync()`` first.
        trace: record a per-bucket CUDA-event timeline in ``opt.timeline`` (see timeline.py).
        reduce_transport: ``"collective"`` (default): one reduce-scatter of the process group per
            bucket. ``"copy_engine"`` (CUDA, the GPUs of one node with peer access): each bucket's
            slices are copied into the peers' receive buffers by copy engines, with no SM taken
            from backward (straight from the gradients where they are large and in the reduce
            dtype: no prep kernel), and summed in the step (copy_engine.py); costs (world size -
            1) x the gradient shard of memory outside torch's caching allocator.
        keep_grads_until_step: copy-engine transport only, off by default. Every parameter of
            at least ``DIRECT_MIN_ELEMENTS`` (65,536) elements gets a bucket of its own, whatever
            ``bucket_size``; where this rank's slice of such a bucket lies inside the gradient
            (no padding in it), the gradient is kept until the step and its slice is summed in
            place, instead of being copied out beside backward: less memory traffic beside
            backward's kernels, but each such gradient is held whole from backward to the step
            ((world size - 1) / world size of it more).
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
        step_chunks: int = 2,
        overlap_param_gather: bool = False,
        trace: bool = False,
        reduce_transport: str = "collective",
        keep_grads_until_step: bool = False,
    ):
        if reduce_transport not in TRANSPORTS:
            raise ValueError(f"tritonzero: reduce_transport must be one of {TRANSPORTS}, got {reduce_transport!r}")
        if keep_grads_until_step and reduce_transport != "copy_engine":
            raise ValueError("tritonzero: keep_grads_until_step needs reduce_transport='copy_engine'")
        if step_chunks < 1:
            raise ValueError(f"tritonzero: step_chunks must be at least 1, got {step_chunks}")
        if process_group is None and dist.is_available() and dist.is_initialized():
            process_group = dist.group.WORLD
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group) if process_group is not None else 1
        self.rank = dist.get_rank(process_group) if process_group is not None else 0

        params = [p for p in model.parameters() if p.requires_grad]
        self._frozen = [p for p in model.parameters() if not p.requires_grad]
        device = check_params(params)
        groups = optimizer_group_of(optimizer, params)
        # Keeping needs a rank's slice inside one gradient: large ones alone in their buckets.
        alone_from = DIRECT_MIN_ELEMENTS if keep_grads_until_step else None
        layouts = plan_buckets(params, groups, bucket_size, self.world_size, alone_from)
        check_same_on_all_ranks(
            repr([(tuple(p.shape), p.dtype, g) for p, g in zip(params, groups)] + [bucket_size, alone_from]),
            process_group, device,
        )
        if trace and device.type != "cuda":
            raise ValueError("tritonzero: trace=True records CUDA events and needs CUDA parameters")
        self.timeline = Timeline() if trace else None

        if loss_scale is None and any(p.dtype == torch.float16 for p in params):
            loss_scale = LossScalePolicy()
        if isinstance(loss_scale, (int, float)):
            loss_scale = LossScalePolicy(init_scale=float(loss_scale), dynamic=False)
        self.scaler = LossScaler(loss_scale, device) if loss_scale is not None else None

        self.buckets = [
            Bucket(i, layout, params, self.rank, reduce_dtype or layout.dtype, device) for i, layout in enumerate(layouts)
        ]
        cuda = device.type == "cuda"
        comm_stream = torch.cuda.Stream(device, priority=-1 if high_priority_comm else 0) if cuda else None
        grad_group = process_group
        if cuda and high_priority_comm and process_group is not None and dist.get_backend(process_group) == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options.is_high_priority_stream = True
            grad_group = dist.new_group(
                dist.get_process_group_ranks(process_group), backend="nccl", pg_options=options, use_local_synchronization=True
            )
        transport = None
        if reduce_transport == "copy_engine" and self.world_size > 1:
            if not cuda:
                raise ValueError("tritonzero: reduce_transport='copy_engine' needs CUDA parameters")
            transport = CopyEngineReduce(self.buckets, process_group, self.rank, self.world_size, keep_grads_until_step)
        self.sync = GradSync(
            self.buckets, self.world_size, grad_group, CommLauncher(device, comm_stream), self.scaler,
            max_buckets_in_flight, self.timeline, transport,
        )
        # Overlapped all-gathers share the reduce-scatters' communicator: NCCL runs one
        # communicator's collectives in issue order on one stream, so an all-gather still in
        # flight behind the next forward never runs beside a reduce-scatter of another one.
        gather_group = grad_group if overlap_param_gather else process_group
        self._gather = ParamGather(model, self.buckets, gather_group, overlap_param_gather, self.timeline, step_chunks)
        self._master_grads = MasterGrads(self.buckets, device, self.sync.pending_factor)
        self._found_inf: torch.Tensor | None = None  # this step's agreed overflow flag, once known

        inner_groups = []
        for gi, group in enumerate(optimizer.param_groups):
            hyper = {k: v for k, v in group.items() if k != "params"}
            inner_groups.append({**hyper, "params": [b.master for b in self.buckets if b.layout.group == gi]})
        self.inner = _rebuild(optimizer, inner_groups)
        chunk_ids = [{id(b.master) for b in chunk} for chunk in self._gather.chunks]
        self._chunk_params = [[[m for m in g["params"] if id(m) in ids] for g in inner_groups] for ids in chunk_ids]
        # Share (not copy) the inner optimizer's groups and state, so lr schedulers and user code
        # that edit ``opt.param_groups`` reach the optimizer that steps.
        super().__init__(self.inner.param_groups, self.inner.defaults)
        self.param_groups = self.inner.param_groups
        self.state = self.inner.state

    # ------------------------------------------------------------------ backward side
    @property
    def loss_scale(self) -> float:
        """The current loss scale (1.0 without scaling); reading it syncs with the device."""
        return self.scaler.value if self.scaler is not None else 1.0

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()`` with the loss scale applied; buckets reduce as they fill."""
        (loss * self.scaler.scale if self.scaler is not None else loss).backward()

    def no_sync(self) -> contextlib.AbstractContextManager:
        """Accumulate local gradients over micro-batches with no communication; the first
        backward outside reduces the sums (the sum of the micro-batch gradients, as DDP's
        ``no_sync``: divide each micro-batch loss by their number for a mean)."""
        return self.sync.no_sync()

    def finish_grad_sync(self) -> None:
        """Make the current stream wait for every bucket's reduce-scatter (no host sync on CUDA)."""
        self.sync.finish()

    def finish_param_sync(self) -> None:
        """Make the current stream wait for every parameter all-gather still in flight (with
        ``overlap_param_gather``; a no-op otherwise)."""
        self._gather.wait_all()

    # ------------------------------------------------------------------ step side
    def _prepare_grads(self, norm_type: float | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The first call of a step waits for the reductions, turns the reduced shards into
        unscaled fp32 master gradients in one pass that also catches non-finite values
        (master_grads.py), and agrees across ranks on overflow with one all-reduce, which also
        carries the shard's norm term when ``norm_type`` is given. Later calls only compute the
        norm asked for.

        Returns (found_inf, total_norm or None): device tensors, never read on the host here.
        """
        first = self._found_inf is None
        if first:
            # HAZARD (write-after-read): the step rewrites master weights and parameter shards
            # that last step's all-gathers (those of buckets no forward waited for) may still
            # read; and the all-reduce below must not run beside them on another communicator.
            self.finish_param_sync()
            self.sync.finish()
            self.sync.sum_received()
            scale = self.scaler.scale if self.scaler is not None else None
            found_inf = self._master_grads.build(self.sync.flag, scale, self.sync.keeps_scale)
        else:
            found_inf = self._found_inf
        summed = [found_inf] if first else []  # all-reduced with SUM in one call
        local_max = None
        if norm_type is not None:
            norms = torch.stack(torch._foreach_norm([b.master.grad for b in self.buckets], norm_type))
            if norm_type == float("inf"):
                local_max = norms.max()
            else:
                summed.append(norms.pow(norm_type).sum().reshape(1))
        stats = torch.cat(summed) if summed else None
        if self.world_size > 1:
            if stats is not None:
                dist.all_reduce(stats, group=self.process_group)
            if local_max is not None:
                dist.all_reduce(local_max, op=dist.ReduceOp.MAX, group=self.process_group)
        if first:
            # Exactly 0 or 1: fused optimizers skip on found_inf == 1 and subtract it from their step count.
            self._found_inf = (stats[:1] > 0).float()
        total = None
        if norm_type is not None:
            total = local_max if local_max is not None else stats[-1].pow(1.0 / norm_type)
        return self._found_inf, total

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> torch.Tensor:
        """Clip the gradients of every rank's shard by their global norm, as
        ``torch.nn.utils.clip_grad_norm_`` would on the full gradients; returns the total norm.

        Costs one pass over the shard and one all-reduce of a scalar (shared with the overflow
        check); no host sync unless ``error_if_nonfinite``. A non-finite norm means the step
        will be skipped anyway.
        """
        _, total = self._prepare_grads(float(norm_type))
        if error_if_nonfinite and not torch.isfinite(total):
            raise RuntimeError(f"tritonzero: the total norm of order {norm_type} of the gradients is non-finite")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_([b.master.grad for b in self.buckets], coef)
        return total

    @torch.no_grad()
    def step(self, closure=None):
        """Step this rank's fp32 shard and all-gather the parameters; skipped on every rank when
        any rank saw a non-finite gradient (the loss scale then moves).

        Host syncs: none with a fused inner optimizer (it skips on the device from ``found_inf``),
        one (reading the overflow flag) otherwise.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        stray = [p for p in self._frozen if p.grad is not None]
        if stray:
            self.zero_grad()  # leave no collective in flight behind the error
            raise RuntimeError(
                f"tritonzero: {len(stray)} parameter(s) frozen when the ZeroOptimizer was built now have gradients; "
                "build a new ZeroOptimizer to train them"
            )
        found_inf, _ = self._prepare_grads()
        mark = marker(self.timeline)
        mark("compute", "step start")
        fused = getattr(self.inner, "_step_supports_amp_scaling", False)
        if fused:
            self.inner.found_inf = found_inf.reshape(())  # fused kernels skip the update (and step count) on the device
        overflow = not fused and bool(found_inf.item())  # the one host sync of a non-fused step
        if not overflow:
            # Chunk by chunk, so that each chunk's all-gather runs beside the next chunk's step.
            for i in range(len(self._gather.chunks)):
                with self._stepping(i):
                    self.inner.step()
                self._gather.start(i)
            if not self._gather.overlap:
                self._gather.wait_all()
        if fused:
            del self.inner.found_inf
        if self.scaler is not None:
            self.scaler.update(found_inf)
        for b in self.buckets:
            b.master.grad = None
        mark("compute", "step end")
        if self.timeline is not None:
            self.timeline.new_step()
        self._reset()
        return loss

    @contextlib.contextmanager
    def _stepping(self, chunk: int):
        """The inner optimizer's param groups hold only this chunk's masters, until exit. Any
        element-wise optimizer (which ZeRO's flat shards need anyway) steps them as it would all."""
        full = [group["params"] for group in self.inner.param_groups]
        for group, params in zip(self.inner.param_groups, self._chunk_params[chunk]):
            group["params"] = params
        try:
            yield
        finally:
            for group, params in zip(self.inner.param_groups, full):
                group["params"] = params

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop this step's gradients: waits for reductions in flight, then resets every bucket."""
        self._reset()
        for b in self.buckets:
            b.master.grad = None
            for p in b.params:  # gradients accumulated under no_sync
                p.grad = None

    def _reset(self) -> None:
        self._found_inf = None
        self.sync.reset()

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
