# Sourced by the device scripts in this folder (from the repository root, on a lent machine):
# the environment every multi-GPU run keeps, and this checkout installed in place.
# SOCKET holds the variables that put NCCL on its socket transport over loopback (~3 GB/s):
#   env $SOCKET torchrun ...
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SOCKET="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
