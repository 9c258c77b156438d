"""Triton kernels of tritonzero, installed as ``tritonzero.kernels``.

Without a CUDA device the kernels run under the Triton interpreter: ``TRITON_INTERPRET`` must be
set before ``@triton.jit`` functions are defined, so it is defaulted here, before they are imported.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from tritonzero.kernels.bucket_prep import DEFAULT_WARPS, BucketPrepPlan, SourceTable, default_block, prep_bucket  # noqa: E402

__all__ = ["BucketPrepPlan", "SourceTable", "prep_bucket", "default_block", "DEFAULT_WARPS"]
