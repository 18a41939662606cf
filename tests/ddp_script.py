"""Run by tests/test_distributed.py under torchrun: data-parallel NG-EBM fits on shared data.

Usage: torchrun --standalone --nproc_per_node=2 tests/ddp_script.py OUT
Every process writes its fitted parameters and per-epoch losses to OUT.<rank>.npz.
"""

import pickle
import sys

import numpy as np
from skorch.dataset import ValidSplit
from torch import distributed as dist

from ebmclassifier.distributed import DataParallelNGEBMClassifier


def problem() -> tuple[np.ndarray, np.ndarray]:
    """100 samples; 80 train in global batches of 15 (8 + 7 per process), the last of 5."""
    rng = np.random.default_rng(0)
    centers = np.array([[2.0, 0.0, 0.0, 0.0], [-2.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    y = rng.integers(0, 3, size=100)
    X = centers[y] + 0.7 * rng.standard_normal((100, 4))
    return X.astype(np.float32), y


#: Shared by the data-parallel run and the single-process reference of the test.
PARAMS = dict(
    beta=0.5,
    max_epochs=4,
    batch_size=15,
    lr=1e-2,
    random_state=0,
    device="cpu",
    module__hidden_sizes=(16, 16),
    # Validation runs on every process on the whole validation set, under DDP's no_sync.
    train_split=ValidSplit(5, stratified=True),
)
GRAD_NORMS = ("exact", "finite_difference")


def main(out: str) -> None:
    dist.init_process_group("gloo")
    X, y = problem()
    result = {}
    for grad_norm in GRAD_NORMS:
        clf = DataParallelNGEBMClassifier(grad_norm=grad_norm, **PARAMS).fit(X, y)
        for name, value in clf.module_.state_dict().items():
            result[f"{grad_norm}/{name}"] = value.numpy()
        result[f"{grad_norm}/train_loss"] = np.array(clf.history[:, "train_loss"])
        result[f"{grad_norm}/valid_loss"] = np.array(clf.history[:, "valid_loss"])
        # The fitted estimator holds the plain network again and pickles.
        result[f"{grad_norm}/pickled"] = np.frombuffer(pickle.dumps(clf), dtype=np.uint8)
    np.savez(f"{out}.{dist.get_rank()}.npz", **result)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
