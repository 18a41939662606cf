"""The synthetic latent-tree task: accuracy and tree recovery (UAS) for every gradient method.

A plain PyTorch loop (no estimator) over the library's pieces: make_latent_trees, the BiLSTM
arc scorer, the tree GCN decoder and tree_latent. For each gradient method and seed it trains
on the label only and reports test accuracy and the unlabeled attachment score of the MAP tree
against the gold tree; the table gives medians over seeds. Two references bracket it: the
decoder fed the gold tree ("gold tree") and fed no arc at all ("no tree").

    python benchmarks/latent_trees_synthetic.py --seeds 0 1 2 --epochs 15
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from torch import nn

from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.latent.trees import arcs_to_heads, heads_to_arcs, tree_map
from ebmclassifier.latent.trees.latent import tree_latent, tree_latent_eval
from ebmclassifier.latent.trees.networks import BiLSTMArcScorer, TreeGCNDecoder, sequence_lengths

METHODS = ("ste", "spigot", "spigot_ce", "spigot_eg", "marginals", "sparsemap", "sfe")


def uas(scores, lengths, gold, projective):
    pred = arcs_to_heads(tree_map(scores, lengths, projective), lengths)
    real = gold >= 0
    return float((pred[real] == gold[real]).float().mean())


def run(method, seed, data, args):
    torch.manual_seed(seed)
    (x_tr, y_tr, h_tr), (x_te, y_te, h_te) = data
    vocab = int(max(x_tr.max(), x_te.max())) + 1
    encoder = BiLSTMArcScorer(vocab, args.dim, args.dim, args.dim)
    decoder = TreeGCNDecoder(vocab, 2, args.dim, args.dim, n_layers=args.layers)
    params = [*encoder.parameters(), *decoder.parameters()]
    opt = torch.optim.Adam(params, lr=args.lr)
    gen = torch.Generator().manual_seed(seed)
    n = len(x_tr)
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, args.batch_size):
            idx = order[start : start + args.batch_size]
            xb, yb, hb = x_tr[idx], y_tr[idx], h_tr[idx]
            lengths = sequence_lengths(xb)
            xb = xb[:, : int(lengths.max())]
            hb = hb[:, : int(lengths.max())]

            def per_sample_loss(z, xb=xb, yb=yb):
                return nn.functional.cross_entropy(decoder(xb, z), yb, reduction="none")

            if method == "gold":
                z = heads_to_arcs(hb)
            elif method == "none":
                z = torch.zeros(len(xb), xb.shape[1] + 1, xb.shape[1] + 1)
            else:
                z = tree_latent(
                    encoder(xb),
                    lengths,
                    method,
                    per_sample_loss,
                    projective=args.projective,
                    step_size=args.step_size,
                    generator=gen,
                )
            # per-sample losses summed: gamma reaching z is each sample's own gradient
            loss = per_sample_loss(z).sum()
            opt.zero_grad()
            loss.backward()
            for p in params:  # the batch mean, for every method alike
                if p.grad is not None:
                    p.grad /= len(xb)
            opt.step()
    with torch.no_grad():
        lengths = sequence_lengths(x_te)
        scores = encoder(x_te)
        if method == "gold":
            z = heads_to_arcs(h_te)
        elif method == "none":
            z = torch.zeros_like(scores)
        else:
            z = tree_latent_eval(scores, lengths, method, args.projective)
        acc = float((decoder(x_te, z).argmax(1) == y_te).float().mean())
        recovered = uas(scores, lengths, h_te, args.projective)
    return acc, recovered


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["gold", "none", *METHODS])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=8)
    parser.add_argument("--n-values", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--step-size", type=float, default=1.0)
    parser.add_argument("--non-projective", dest="projective", action="store_false")
    args = parser.parse_args()
    x, y, h = make_latent_trees(
        args.n_train + args.n_test,
        max_length=args.max_length,
        n_values=args.n_values,
        random_state=12345,
    )
    x, y, h = torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(h)
    tr, te = slice(0, args.n_train), slice(args.n_train, None)
    data = ((x[tr], y[tr], h[tr]), (x[te], y[te], h[te]))
    print(f"{'method':<10} {'accuracy':>9} {'UAS':>6}   per seed (acc/UAS)   time")
    for method in args.methods:
        t0 = time.perf_counter()
        results = [run(method, seed, data, args) for seed in args.seeds]
        accs, uases = zip(*results, strict=True)
        per_seed = " ".join(f"{a:.3f}/{u:.2f}" for a, u in results)
        print(
            f"{method:<10} {statistics.median(accs):>9.3f} {statistics.median(uases):>6.3f}   "
            f"{per_seed}   {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
    print(f"majority-class accuracy: {max(np.mean(y[te].numpy()), 1 - np.mean(y[te].numpy())):.3f}")


if __name__ == "__main__":
    main()
