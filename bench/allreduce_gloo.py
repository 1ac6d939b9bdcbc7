#!/usr/bin/env python3
"""All-reduce bandwidth of PyTorch's gloo backend versus message size, printed as the same
CSV as bench_allreduce (bytes,seconds,algbw_gbps,busbw_gbps) by rank 0: for each size a
warm-up, then REPS all-reduces of an f32 tensor, each after a barrier, the median time.
Starts its own WORLD processes on a free loopback port (torch.multiprocessing).

usage: allreduce_gloo.py [--world N] [--max-bytes B] [--reps R]   (Debian's python3-torch)"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, port, max_bytes, reps):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        print("bytes,seconds,algbw_gbps,busbw_gbps", flush=True)
    size = 4096
    while size <= max_bytes:
        t = torch.ones(size // 4, dtype=torch.float32)
        times = []
        for r in range(-1, reps):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            if r >= 0:
                times.append(time.perf_counter() - start)
        seconds = sorted(times)[len(times) // 2]  # the upper median, as bench_util.h takes it
        algbw = size / seconds / 1e9
        if rank == 0:
            print(f"{size},{seconds:.6g},{algbw:.4g},{algbw * 2 * (world - 1) / world:.4g}", flush=True)
        size *= 4
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(args.world, port, args.max_bytes, args.reps), nprocs=args.world)


if __name__ == "__main__":
    main()
