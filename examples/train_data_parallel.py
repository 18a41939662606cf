"""
Data-parallel training with DistributedDataParallel
===================================================

Train one NG-EBM on several processes with DistributedDataParallel.

Run: torchrun --standalone --nproc_per_node=2 examples/train_data_parallel.py

On CPUs the processes talk through gloo; on a machine with N GPUs use --nproc_per_node=N: the
script picks nccl, and device="auto" gives process LOCAL_RANK the GPU LOCAL_RANK.
"""

import pickle

import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler
from torch import distributed as dist

from ebmclassifier.distributed import DataParallelNGEBMClassifier

if __name__ == "__main__":
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    X, y = load_digits(return_X_y=True)  # every process loads the same data
    X = StandardScaler().fit_transform(X)
    # batch_size is the global batch: each of the N processes computes the loss of 1/N of it.
    clf = DataParallelNGEBMClassifier(beta=0.5, batch_size=128, max_epochs=5, random_state=0)
    clf.fit(X, y)
    if dist.get_rank() == 0:  # every process holds the same model; one saves it
        print("training accuracy", round(clf.score(X, y), 3))
        with open("ngebm_ddp.pkl", "wb") as f:
            pickle.dump(clf, f)  # unpickles anywhere ebmclassifier is installed
    dist.destroy_process_group()
