"""Peak memory and throughput of image data held as the user holds it, against the array path.

An image set is written once as a ``uint8`` ``.npy`` file (random pixels: the figures are of
memory and speed, not accuracy). Each path then fits ``NGEBMClassifier`` (the default loss, an
MLP of one hidden layer on the flattened images) for one epoch and predicts on every image, in a
fresh process, while a thread samples ``/proc/self/status`` every 20 ms:

- ``float32``: the array path, what ``fit`` did with any input before it read data in chunks:
  the images as one float32 array (``np.asarray(X, np.float32)``, counted), then fitted;
- ``uint8``: the images read into memory as ``uint8`` (``np.load``), kept so on the device;
- ``memmap``: the file mapped (``np.load(mmap_mode="r")``), read batch by batch;
- ``dataset``: a ``torch.utils.data.Dataset`` over the memmap yielding ``(image, label)``,
  with ``--workers`` DataLoader workers (``iterator_train__num_workers``).

Reported per path: the peak anonymous memory (``RssAnon``: the process's own allocations) and
the peak resident file pages (``RssFile``: pages of the mapped file, page cache that the kernel
reclaims under pressure, so that data larger than memory train), ``ru_maxrss``, the seconds
before training (validation and the data's statistics), training and prediction in images per
second. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/large_data.py --n-images 100000
    OMP_NUM_THREADS=1 python benchmarks/large_data.py --n-images 1000000 --paths memmap,dataset

The second writes a 3 GB file; its array path would need 12 GB of float32 and a second copy as
a tensor, which this benchmark does not try.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from ebmclassifier import NGEBMClassifier

PATHS = ("float32", "uint8", "memmap", "dataset")


class Images(torch.utils.data.Dataset):
    """A file-backed dataset: ``(image, label)`` read from a memmap, one item at a time."""

    def __init__(self, path: str) -> None:
        self.X = np.load(path, mmap_mode="r")

    def __len__(self) -> int:
        return len(self.X)

    def __getitem__(self, i: int):
        return self.X[i], i % 10


def _status() -> dict[str, int]:
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {key: int(fields[key].split()[0]) * 1024 for key in ("RssAnon", "RssFile")}


class PeakSampler(threading.Thread):
    """Peaks of ``RssAnon`` and ``RssFile``, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.interval, self.peaks, self.running = interval, {"RssAnon": 0, "RssFile": 0}, True

    def run(self) -> None:
        while self.running:
            for key, value in _status().items():
                self.peaks[key] = max(self.peaks[key], value)
            time.sleep(self.interval)


def _data(path_kind: str, file: str):
    if path_kind == "float32":
        return np.asarray(np.load(file, mmap_mode="r"), dtype=np.float32)
    if path_kind == "uint8":
        return np.load(file)
    if path_kind == "memmap":
        return np.load(file, mmap_mode="r")
    return Images(file)


def child(path_kind: str, file: str, workers: int, batch_size: int) -> dict:
    """One path in this process: fit one epoch, predict everything; the measurements."""
    shape = np.load(file, mmap_mode="r").shape
    X_view = np.load(file, mmap_mode="r").reshape(shape[0], -1)  # a view: nothing read yet
    y = np.arange(shape[0]) % 10
    params = dict(max_epochs=1, batch_size=batch_size, module__hidden_sizes=(64,), random_state=0)
    if path_kind == "dataset":
        params.update(iterator_train__num_workers=workers, iterator_valid__num_workers=workers)
    NGEBMClassifier(**params).fit(X_view[:512].astype(np.float32), y[:512])  # warm-up
    sampler = PeakSampler()
    sampler.start()
    start = time.perf_counter()
    X = _data(path_kind, file)
    if path_kind != "dataset":
        X = X.reshape(len(X), -1)
    else:
        X.X = X.X.reshape(len(X.X), -1)
    clf = NGEBMClassifier(**params).fit(X, None if path_kind == "dataset" else y)
    fitted = time.perf_counter()
    clf.predict(X)
    predicted = time.perf_counter()
    sampler.running = False
    sampler.join()
    train = float(clf.history[-1, "dur"])
    n = shape[0]
    return {
        "path": path_kind,
        "workers": workers if path_kind == "dataset" else 0,
        "peak_anon_MiB": sampler.peaks["RssAnon"] / 2**20,
        "peak_file_MiB": sampler.peaks["RssFile"] / 2**20,
        "maxrss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "before_training_s": fitted - start - train,
        "train_images_per_s": n / train,
        "predict_images_per_s": n / (predicted - fitted),
    }


def _write(file: Path, n: int, shape: tuple[int, ...]) -> None:
    X = np.lib.format.open_memmap(file, "w+", np.uint8, (n, *shape))
    rng = np.random.default_rng(0)
    for start in range(0, n, 10_000):
        stop = min(n, start + 10_000)
        X[start:stop] = rng.integers(0, 256, (stop - start, *shape), dtype=np.uint8)
    X.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=100_000)
    parser.add_argument("--shape", type=int, nargs="+", default=[3, 32, 32])
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--dir", default=None, help="where to write the image file")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child(args.child[0], args.child[1], args.workers, args.batch_size)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        file = Path(folder, "images.npy")
        _write(file, args.n_images, tuple(args.shape))
        size = file.stat().st_size / 2**20
        print(f"{args.n_images} uint8 images of shape {tuple(args.shape)}: {size:.0f} MiB")
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, pid {os.getpid()}")
        header = "path      workers  anon MiB  file MiB  maxrss MiB  before s  train img/s"
        header += "  predict img/s"
        print(header)
        for path_kind in args.paths.split(","):
            command = [sys.executable, __file__, "--child", path_kind, str(file)]
            command += ["--workers", str(args.workers), "--batch-size", str(args.batch_size)]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"{r['path']:<9} {r['workers']:>7} {r['peak_anon_MiB']:>9.0f} "
                f"{r['peak_file_MiB']:>9.0f} {r['maxrss_MiB']:>11.0f} "
                f"{r['before_training_s']:>9.1f} {r['train_images_per_s']:>12.0f} "
                f"{r['predict_images_per_s']:>14.0f}"
            )


if __name__ == "__main__":
    main()
