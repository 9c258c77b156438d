"""Every equivalence case (the mixed-dtype ones included) on ONE GPU, world size 1, NCCL, both
reduce transports: the CUDA path's prep kernels, loss scale and step against the fp64 reference,
with no collective to speak of. Twentieth session, when only one-GPU machines were lent.

    python benchmarks/results/equivalence_1gpu_s20.py    # log: equivalence_1gpu_s20.log
"""
import os
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from distributed import run_ranks  # noqa: E402
from test_equivalence import CASES, all_cases, tolerance  # noqa: E402

if __name__ == "__main__":
    failed = 0
    for transport in ("collective", "copy_engine"):
        (res,) = run_ranks(1, all_cases, "cuda", transport, backend="nccl")
        for name, r in res.items():
            ok = r["rel_err"] < tolerance(CASES[name])
            failed += not ok
            if "mixed" in name or not ok:
                print(f"{transport:12s} {name:28s} rel_err {r['rel_err']:.2e} tol {tolerance(CASES[name]):.0e} {'ok' if ok else 'FAIL'}")
        print(f"{transport}: {len(res)} cases, {sum(r['rel_err'] < tolerance(CASES[n]) for n, r in res.items())} within tolerance")
    sys.exit(1 if failed else 0)
