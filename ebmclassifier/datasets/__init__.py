"""Data sets: generated tasks and loaders."""

from .latent_trees import make_latent_trees

__all__ = ["make_latent_trees"]
