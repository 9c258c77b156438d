"""Fifteenth session: AdamW on bf16 parameters against the fp64 reference, on 1, 2 and 4 GPUs
(NCCL), with bf16 and fp32 reduction: how much of the update error is the sync's."""
import sys

sys.path.insert(0, "tests")
from distributed import run_ranks  # noqa: E402
from equivalence import run_case  # noqa: E402


def cases(transport):
    return {f"{name} {transport}": run_case("adamw", "bf16", size, device="cuda", reduce_dtype=r, reduce_transport=transport)["rel_err"]
            for name, size, r in (("bf16-200", 200, None), ("bf16-1e6", 10**6, None), ("bf16-200 reduce fp32", 200, "fp32"))}


if __name__ == "__main__":
    for world in (1, 2, 4):
        for transport in ("collective", "copy_engine") if world > 1 else ("collective",):
            per_rank = run_ranks(world, cases, transport, backend="nccl")
            print(world, " ".join(f"{k}: {v:.4f}" for k, v in per_rank[0].items()), flush=True)
