"""Cost of one JEM training step over one NG-EBM step and one cross-entropy step.

The three estimators get the same network (the same weights) and the same batch; each
training step (loss, backward, optimizer update, through the estimator's own ``train_step``)
is timed after a warm-up, interleaved so that machine noise hits all three alike, and the
ratios of the medians are printed. The NG-EBM paper reports JEM about 6x more expensive than
NG-EBM.

    python benchmarks/jem_step_cost.py                  # 8x8 digits images, default ConvNet
    python benchmarks/jem_step_cost.py --data flat      # 64 features, default MLP
    python benchmarks/jem_step_cost.py --sgld-steps 5 --repeats 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from ebmclassifier import JEMClassifier, NGEBMClassifier


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", choices=["flat", "images"], default="images")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sgld-steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    if args.data == "images":
        X = X.reshape(-1, 1, 8, 8)
    common = dict(max_epochs=0, batch_size=args.batch_size, random_state=0, device=args.device)
    nets = {
        "cross-entropy": NGEBMClassifier(beta=0.0, **common),
        "NG-EBM": NGEBMClassifier(beta=0.5, **common),
        "JEM": JEMClassifier(sgld_steps=args.sgld_steps, **common),
    }
    for net in nets.values():
        net.fit(X, y)  # max_epochs=0: builds the module, optimizer and buffer only
    state = nets["JEM"].module_.state_dict()
    for net in nets.values():
        net.module_.load_state_dict(state)
    device = nets["JEM"].device_
    batch = (
        torch.as_tensor(X[: args.batch_size], device=device),
        torch.as_tensor(y[: args.batch_size], device=device),
    )

    def one_step(net):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        net.train_step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for net in nets.values():
        net.history.new_epoch()
        net.history.new_batch()
        net.on_train_begin(net, X=torch.as_tensor(X, device=device), y=torch.as_tensor(y))
        for _ in range(args.warmup):
            one_step(net)
    times = {name: [] for name in nets}
    for _ in range(args.repeats):
        for name, net in nets.items():
            times[name].append(one_step(net))
    print(
        f"# {args.data}, batch {args.batch_size}, JEM with {args.sgld_steps} SGLD steps, {device}"
    )
    for name, t in times.items():
        p10, p50, p90 = np.percentile(t, [10, 50, 90]) * 1e3
        print(f"{name:>14}: median {p50:8.2f} ms  (p10 {p10:.2f}, p90 {p90:.2f})")
    median = {name: np.median(t) for name, t in times.items()}
    print(f"JEM / NG-EBM        = {median['JEM'] / median['NG-EBM']:.1f}x")
    print(f"JEM / cross-entropy = {median['JEM'] / median['cross-entropy']:.1f}x")
    print(f"NG-EBM / cross-entropy = {median['NG-EBM'] / median['cross-entropy']:.1f}x")


if __name__ == "__main__":
    main()
