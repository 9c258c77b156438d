import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

# Without CUDA, tritonzero.kernels runs its kernels under the Triton interpreter. With CUDA the
# kernels are compiled for the GPU and cannot take CPU tensors, so CPU-only (gloo) tests skip
# there; the GPU has its own tests (test_nccl.py, the cuda cases of test_prep_kernel.py).
cpu_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="CPU kernels need the Triton interpreter; this machine compiles for CUDA"
)
