"""Checkpoints that resume at any world size, on ``torch.distributed.checkpoint`` (DCP).

Each trainable parameter is stored flat, as the pieces the ranks own: its fp32 master weights
under ``model.<name>`` and each optimizer state shaped like the master (Adam's ``exp_avg``, ...)
under ``optim.<name>.<key>``; DCP reshards them on load for any world size and bucket size.
Frozen parameters and buffers are stored whole, scalar optimizer states (a step count) once
per param group, hyperparameters and the loss scaler as objects. Same world size: bit-exact.

Example::

    tritonzero.checkpoint.save("ckpt/step100", model, opt)      # on every rank
    tritonzero.checkpoint.load("ckpt/step100", model, opt)      # on every rank, any world size
    full = tritonzero.checkpoint.consolidate("ckpt/step100")    # one process: a plain state_dict
"""

from __future__ import annotations

import pickle

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor
from torch.distributed._shard.sharded_tensor.metadata import ShardedTensorMetadata, TensorProperties

from tritonzero.bucket import Bucket
from tritonzero.optimizer import ZeroOptimizer

__all__ = ["save", "load", "consolidate"]


def _piece(opt: ZeroOptimizer, bucket: Bucket, slot: int, shard_tensor: torch.Tensor):
    """This rank's piece of parameter ``slot`` of ``bucket``, read from ``shard_tensor`` (a tensor
    laid out like the bucket's shard), as a flat tensor DCP can place among the other ranks'."""
    off, n = bucket.layout.offsets[slot], bucket.layout.numels[slot]
    owned = []  # (rank, first element of the flat parameter, length)
    for r in range(opt.world_size):
        lo, hi = bucket.layout.shard_range(r)
        if max(off, lo) < min(off + n, hi):
            owned.append((r, max(off, lo) - off, min(off + n, hi) - max(off, lo)))
    lo = bucket.layout.shard_range(opt.rank)[0]
    mine = [(s, length) for r, s, length in owned if r == opt.rank]
    local = [shard_tensor[off + s - lo : off + s - lo + length] for s, length in mine]
    if opt.process_group is None:
        return local[0]  # one rank owns everything
    dev = shard_tensor.device
    meta = ShardedTensorMetadata(
        [ShardMetadata([s], [length], f"rank:{r}/{dev}") for r, s, length in owned],
        torch.Size([n]),
        TensorProperties(dtype=shard_tensor.dtype),
    )
    shards = [Shard(t, ShardMetadata([s], [length], f"rank:{opt.rank}/{dev}")) for t, (s, length) in zip(local, mine)]
    return ShardedTensor._init_from_local_shards_and_global_metadata(shards, meta, process_group=opt.process_group)


def _materialize_optimizer_state(opt: ZeroOptimizer) -> None:
    """Let the inner optimizer create its (lazy) state with a step of zero gradients at lr 0, so a
    load has tensors of the right dtype and device to fill. Parameters do not move."""
    masters = [m for g in opt.inner.param_groups for m in g["params"]]
    if all(opt.inner.state.get(m) for m in masters):
        return
    lrs = [g["lr"] for g in opt.inner.param_groups]
    with torch.no_grad():
        for g in opt.inner.param_groups:
            g["lr"] = 0.0
        for m in masters:
            m.grad = torch.zeros_like(m)
        opt.inner.step()
        for m in masters:
            m.grad = None
        for g, lr in zip(opt.inner.param_groups, lrs):
            g["lr"] = lr


def _state(model: torch.nn.Module, opt: ZeroOptimizer) -> dict:
    """The DCP state dict over ``opt``'s live tensors (a load fills them in place)."""
    names = {id(p): n for n, p in model.named_parameters()}
    managed = {id(p) for b in opt.buckets for p in b.params}
    state: dict = {f"model.{k}": v.detach() for k, v in model.state_dict(keep_vars=True).items() if id(v) not in managed}
    for b in opt.buckets:
        states = opt.inner.state.get(b.master, {})
        shaped = {k: v for k, v in states.items() if torch.is_tensor(v) and v.shape == b.master.shape}
        for slot, p in enumerate(b.params):
            state[f"model.{names[id(p)]}"] = _piece(opt, b, slot, b.master)
            for k, v in shaped.items():
                state[f"optim.{names[id(p)]}.{k}"] = _piece(opt, b, slot, v)
    for gi, group in enumerate(opt.inner.param_groups):
        first = opt.inner.state.get(group["params"][0], {}) if group["params"] else {}
        for k, v in first.items():
            if not (torch.is_tensor(v) and v.shape == group["params"][0].shape):
                state[f"optim.group{gi}.{k}"] = v  # the same on every master of the group, every rank
    # One byte tensor: DCP flattens nested dicts, and its fallback for "old" checkpoints (taken
    # whenever a rank owns no piece of some parameter) flattens them differently; tensors load
    # in place either way.
    meta = {
        "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.inner.param_groups],
        "loss_scaler": opt.scaler.state_dict() if opt.scaler is not None else None,
        "shapes": {names[id(p)]: tuple(p.shape) for b in opt.buckets for p in b.params},
    }
    state["meta"] = torch.frombuffer(bytearray(pickle.dumps(meta)), dtype=torch.uint8)
    return state


def _meta_placeholder(path: str) -> torch.Tensor:
    """A byte tensor the size of the checkpoint's metadata object, for DCP to load into."""
    return torch.empty(dcp.FileSystemReader(path).read_metadata().state_dict_metadata["meta"].size, dtype=torch.uint8)


def _unpickle(t: torch.Tensor) -> dict:
    return pickle.loads(t.numpy().tobytes())


def save(path: str, model: torch.nn.Module, opt: ZeroOptimizer) -> None:
    """Write a checkpoint of ``model`` and ``opt`` to the folder ``path`` (call on every rank,
    between steps: gradients of a step in progress are dropped)."""
    opt.zero_grad()  # nothing in flight while the masters are read
    dcp.save(_state(model, opt), checkpoint_id=path, process_group=opt.process_group, no_dist=opt.process_group is None)


def load(path: str, model: torch.nn.Module, opt: ZeroOptimizer) -> None:
    """Restore ``model`` and ``opt`` from ``path``, saved at any world size (call on every rank)."""
    opt.zero_grad()
    opt.finish_param_sync()  # no all-gather may still read the shards being overwritten
    saved = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    if any(k.startswith("optim.") for k in saved):
        _materialize_optimizer_state(opt)
    else:
        opt.inner.state.clear()  # saved before the first step: no optimizer state yet
    state = _state(model, opt)
    state["meta"] = _meta_placeholder(path)
    dcp.load(state, checkpoint_id=path, process_group=opt.process_group, no_dist=opt.process_group is None)
    meta = _unpickle(state["meta"])
    for gi, group in enumerate(opt.inner.param_groups):
        group.update(meta["param_groups"][gi])
        for key, value in state.items():
            if key.startswith(f"optim.group{gi}."):
                for m in group["params"]:
                    opt.inner.state[m][key.split(".", 2)[2]] = value.clone() if torch.is_tensor(value) else value
    if opt.scaler is not None and meta["loss_scaler"] is not None:
        opt.scaler.load_state_dict(meta["loss_scaler"])
    with torch.no_grad():
        opt._gather.start_all()  # the model's parameters from the loaded masters
    opt.finish_param_sync()


def consolidate(path: str) -> dict[str, torch.Tensor]:
    """A plain, full ``state_dict`` of the model (fp32 weights in their shapes, buffers), read in
    one process, for inference or export."""
    reader = dcp.FileSystemReader(path)
    metadata = reader.read_metadata().state_dict_metadata
    state: dict = {"meta": _meta_placeholder(path)}
    for key, md in metadata.items():
        if key.startswith("model.") and hasattr(md, "size"):
            state[key] = torch.empty(md.size, dtype=md.properties.dtype)
    dcp.load(state, storage_reader=reader, no_dist=True)
    shapes = _unpickle(state["meta"])["shapes"]
    out = {}
    for key, value in state.items():
        if key.startswith("model."):
            name = key[len("model.") :]
            out[name] = value.view(shapes[name]) if name in shapes else value
    return out
