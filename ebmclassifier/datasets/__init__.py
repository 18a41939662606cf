"""Data sets: offline benchmarks with OOD suites, on-disk loaders, the user's own files,
and generated tasks."""

from .benchmarks import load_digits_ood, load_mnist1d
from .files import load_cifar10, load_cifar100, load_svhn
from .latent_clusters import make_latent_clusters
from .latent_trees import make_latent_trees
from .named import load_named_dataset
from .ood import OOD_KINDS, make_ood_suite
from .user_files import load_array_file

__all__ = [
    "OOD_KINDS",
    "load_array_file",
    "load_cifar10",
    "load_cifar100",
    "load_digits_ood",
    "load_mnist1d",
    "load_named_dataset",
    "load_svhn",
    "make_latent_clusters",
    "make_latent_trees",
    "make_ood_suite",
]
