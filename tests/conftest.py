import os
import sys

# Kernels run under the Triton interpreter on machines without CUDA; it must be chosen before
# any @triton.jit function is defined (tritonzero.kernels also defaults it).
os.environ.setdefault("TRITON_INTERPRET", "0" if os.environ.get("CUDA_VISIBLE_DEVICES") else "1")
sys.path.insert(0, os.path.dirname(__file__))
