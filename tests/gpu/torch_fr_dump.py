#!/usr/bin/env python3
"""A real Flight Recorder dump from this machine's PyTorch, for triage (issue 23's last gap).

    torch_fr_dump.py OUT_DIR

One process, one GPU, ProcessGroupNCCL with the Flight Recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE,
set before the group is made): a few all-reduces, an all-gather and a broadcast, then the dump
PyTorch writes on a watchdog timeout, taken through its own API (_dump_nccl_trace: pickle;
_dump_nccl_trace_json where it exists: JSON), as OUT_DIR/nccl_trace_rank_0 and .json."""
import os
import socket
import sys

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # PyTorch 2.11's name
os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")  # before it
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, init_method="tcp://127.0.0.1:%d" % port,
                            device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    for _ in range(4):
        dist.all_reduce(t)
    g = torch.empty(1 << 20, device="cuda")
    dist.all_gather_into_tensor(g, t)
    dist.broadcast(t, 0)
    torch.cuda.synchronize()
    c10d = torch._C._distributed_c10d
    open(os.path.join(out, "nccl_trace_rank_0"), "wb").write(c10d._dump_nccl_trace())
    if hasattr(c10d, "_dump_nccl_trace_json"):
        j = c10d._dump_nccl_trace_json()
        open(os.path.join(out, "nccl_trace_rank_0.json"), "wb").write(j if isinstance(j, bytes) else j.encode())
    dist.destroy_process_group()
    print("torch %s, NCCL %s: dump of %d bytes in %s" % (torch.__version__, ".".join(map(str, torch.cuda.nccl.version())),
                                                       os.path.getsize(os.path.join(out, "nccl_trace_rank_0")), out))


if __name__ == "__main__":
    main()
