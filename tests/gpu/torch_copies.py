#!/usr/bin/env python3
"""Host<->GPU copy rates as PyTorch measures them, to set beside gpu_copy_bw (issue 22, item 4).

    torch_copies.py BYTES LOOPS SAMPLES OUT.json

Per direction (host->GPU, GPU->host) and host memory (pageable: torch.empty; pinned:
pin_memory=True), two timings of `tensor.copy_`:
  events  LOOPS copies between two CUDA events on the current stream, median of SAMPLES
          (gpu_copy_bw's method, nvbandwidth's copy-engine cases, with PyTorch's memory and copy);
  host    each copy followed by a synchronize, timed with the host clock, median of LOOPS*SAMPLES
          (what a user's `t0 = time(); x.copy_(y); torch.cuda.synchronize()` sees).
GB/s = 1e9 bytes/s. Host buffers are written once before timing (first touch is not timed).
"""
import json
import statistics
import sys
import time

import torch


def rates(dst, src, loops, samples):
    dst.copy_(src)  # untimed: first touch, the driver's staging buffers
    torch.cuda.synchronize()
    ev = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(loops):
            dst.copy_(src, non_blocking=src.is_pinned() or dst.is_pinned())
        b.record()
        b.synchronize()
        ev.append(dst.numel() * loops / (a.elapsed_time(b) * 1e-3) / 1e9)
    host = []
    for _ in range(loops * samples):
        t0 = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        host.append(dst.numel() / (time.perf_counter() - t0) / 1e9)
    return {"events": statistics.median(ev), "host": statistics.median(host)}


def main():
    n, loops, samples, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    res = {"bytes": n, "loops": loops, "samples": samples, "torch": torch.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    for mem in ("pageable", "pinned"):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=(mem == "pinned"))
        h.fill_(1)
        res[mem] = {"host_to_device": rates(dev, h, loops, samples),
                    "device_to_host": rates(h, dev, loops, samples)}
    json.dump(res, open(out, "w"), indent=1)
    for mem in ("pageable", "pinned"):
        for d in ("host_to_device", "device_to_host"):
            r = res[mem][d]
            print("torch %-8s %-14s events %6.2f GB/s  host clock %6.2f GB/s" % (mem, d, r["events"], r["host"]))


if __name__ == "__main__":
    main()
