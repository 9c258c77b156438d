"""What the prep kernel compiles to for an H100/H200 (sm_90), checked without a GPU.

A memory-bound copy must move 16 bytes per load instruction. The kernel reads each gradient
through an address loaded from a table, so the compiler knows its alignment only from the
kernel's own hint; once that hint was lost on the way to the pointer and every load read one
element (32M fp16 elements: 39.2 us against 37.6). Triton compiles for a target without a
device, so this runs on CPU machines too, in a subprocess: the interpreter, which the other CPU
tests use, compiles nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from tritonzero.kernels import DEFAULT_WARPS, default_block

_COMPILE = r"""
import json, re, sys
import torch, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tritonzero.kernels.bucket_prep import _prep_bucket_kernel, default_block, DEFAULT_WARPS, REGION_ALIGN

TL = {"fp16": tl.float16, "bf16": tl.bfloat16, "fp32": tl.float32}
BLOCK = default_block(torch.device("cuda"))  # the runtime's launch on GPUs
out = {}
for src, aligned in json.loads(sys.argv[1]):
    pointers = {"bucket_ptr": "*" + src, "flag_ptr": "*i32", "src_table_ptr": "*i64", "region_ptr": "*i64",
                "chunk_ptr": "*i8", "divisor_ptr": "*fp32"}
    scalars = {"num_regions": "i32", "factor": "fp32"}
    constexprs = {"SRC_DTYPE": TL[src], "DIVIDE": False, "SRC_ALIGNED": aligned, "BLOCK": BLOCK,
                  "REGION_ALIGN": REGION_ALIGN}
    names = _prep_bucket_kernel.arg_names
    signature = {n: pointers.get(n) or scalars.get(n) or "constexpr" for n in names}
    # What Triton assumes of tensor arguments at 16-byte aligned addresses, as at run time.
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in pointers}
    kernel = triton.compile(ASTSource(_prep_bucket_kernel, signature, constexprs=constexprs, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": DEFAULT_WARPS})
    loads = re.findall(r"ld\.global[.\w:]*", kernel.asm["ptx"])
    out[f"{src} {aligned}"] = [l for l in loads if l.endswith(("b16", "b32")) or ".v" in l]
print(json.dumps(out))
"""


def _gradient_loads(cases: list[tuple[str, bool]]) -> dict[str, list[str]]:
    env = dict(os.environ, TRITON_INTERPRET="0")
    run = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(cases)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_aligned_gradients_load_16_bytes_at_a_time():
    loads = _gradient_loads([("fp16", True), ("bf16", True), ("fp32", True), ("fp16", False)])
    for src in ("fp16", "bf16", "fp32"):
        wide = [l for l in loads[f"{src} True"] if re.search(r"\.v4\.b32$", l)]
        # The runtime's block over its threads (2048 over 64: 32 elements a thread), read 16
        # bytes a load on the unmasked path (the masked tail path stays element-wise).
        per_thread = default_block(torch.device("cuda")) // (32 * DEFAULT_WARPS)
        assert len(wide) == per_thread * (4 if src == "fp32" else 2) // 16, (src, loads[f"{src} True"])
    # Without the hint (a gradient at an unaligned address) no load may be wide: the check above
    # tells the two paths apart.
    assert not any(".v" in l for l in loads["fp16 False"]), loads["fp16 False"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
