"""
Training on a memmap of uint8 images, with early stopping
=========================================================

scikit-learn's digits written to disk as ``uint8`` images of shape ``(1, 8, 8)`` and opened as
a ``numpy.memmap``: ``NGEBMClassifier`` reads them a batch at a time (two ``DataLoader``
workers), keeping them ``uint8`` until each batch, and stops early as scikit-learn's
``MLPClassifier`` does: ``early_stopping=True`` holds out a stratified tenth of the training
data and stops when its loss has not improved by ``tol`` for ``n_iter_no_change`` epochs, then
restores the best epoch's weights.

The same fit on the images as one float32 array gives the same probabilities, bit for bit: the
batches, the checks and the data's statistics are the same, only read differently.
"""

import tempfile
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from ebmclassifier import NGEBMClassifier

X, y = load_digits(return_X_y=True)
images = (X * 15).astype(np.uint8).reshape(-1, 1, 8, 8)  # pixel values 0..240
train, test = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=0)
params = dict(max_epochs=100, lr=1e-2, early_stopping=True, n_iter_no_change=5, random_state=0)
params.update(module__channels=(8, 16), module__hidden_size=32)  # a small ConvNet

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder, "digits_train.npy")
    np.save(path, images[train])
    held = np.load(path, mmap_mode="r")  # nothing is read yet
    clf = NGEBMClassifier(**params, iterator_train__num_workers=2).fit(held, y[train])
    print(f"stopped after {clf.n_iter_} of {params['max_epochs']} epochs")
    print(f"best epoch {clf.best_epoch_}: validation loss {clf.best_validation_loss_:.4f}")
    print(f"test accuracy {clf.score(images[test], y[test]):.3f}")
    in_memory = NGEBMClassifier(**params).fit(images[train].astype(np.float32), y[train])
    same = np.array_equal(clf.predict_proba(images[test]), in_memory.predict_proba(images[test]))
    print("the float32 array's fit gives the same probabilities:", same)

# %%
# The training and validation losses per epoch; the weights kept are the best epoch's.
fig = Figure(figsize=(6, 3.5))
ax = fig.subplots()
epochs = np.arange(1, clf.n_iter_ + 1)
ax.plot(epochs, clf.history[:, "train_loss"], label="training loss")
ax.plot(epochs, clf.history[:, "valid_loss"], label="validation loss (held-out tenth)")
ax.axvline(clf.best_epoch_, color="grey", linestyle="--", label=f"best epoch ({clf.best_epoch_})")
ax.set_xlabel("epoch")
ax.set_ylabel("loss (lower is better)")
ax.legend()
fig.tight_layout()
