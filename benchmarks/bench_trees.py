"""Throughput of the tree routines on a batch of 64 sentences of 30 words.

MAP (Eisner, Chu-Liu-Edmonds), marginals (inside-outside by autograd, matrix-tree theorem) and
SparseMAP, each timed after a warm-up over several repeats; the median and the 10th/90th
percentiles are printed with sentences per second. Ratios inside one run are the figures to
compare across machines (e.g. marginals against MAP).

    python benchmarks/bench_trees.py [--device cuda] [--threads 1] [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ebmclassifier.latent.trees import tree_map, tree_marginals, tree_sparsemap


def timed(fn, device, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--skip-sparsemap", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(args.batch, args.length + 1, args.length + 1, generator=g)
    scores = scores.to(device, getattr(torch, args.dtype))
    lengths = torch.full((args.batch,), args.length, device=device)
    cases = {
        "MAP Eisner": lambda: tree_map(scores, lengths, True),
        "MAP Chu-Liu-Edmonds": lambda: tree_map(scores, lengths, False),
        "marginals inside-outside": lambda: tree_marginals(scores, lengths, True),
        "marginals matrix-tree": lambda: tree_marginals(scores, lengths, False),
    }
    if not args.skip_sparsemap:
        cases["SparseMAP projective"] = lambda: tree_sparsemap(scores, lengths, True)
        cases["SparseMAP non-projective"] = lambda: tree_sparsemap(scores, lengths, False)
    print(
        f"batch {args.batch} x {args.length} words, {args.dtype} on {device}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats} after {args.warmup} warm-up"
    )
    print(f"{'routine':<26} {'median ms':>10} {'p10 ms':>8} {'p90 ms':>8} {'sentences/s':>12}")
    medians = {}
    for name, fn in cases.items():
        times = timed(fn, device, args.warmup, args.repeats)
        med = statistics.median(times)
        medians[name] = med
        p10, p90 = times[len(times) // 10], times[(9 * len(times)) // 10 - 1]
        print(
            f"{name:<26} {1e3 * med:>10.1f} {1e3 * p10:>8.1f} {1e3 * p90:>8.1f} "
            f"{args.batch / med:>12.0f}"
        )
    ratio = medians["marginals inside-outside"] / medians["MAP Eisner"]
    print(f"inside-outside marginals / Eisner MAP time ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
