"""Data sets: generated tasks and loaders."""

from .latent_clusters import make_latent_clusters

__all__ = ["make_latent_clusters"]
