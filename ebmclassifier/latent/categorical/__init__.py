"""The categorical latent: the simplex, its oracles and the default networks.

A categorical latent takes one of K values; its polytope is the probability simplex
(:class:`~ebmclassifier.latent.categorical.simplex.Simplex`: MAP = argmax, marginals = softmax,
projection = sparsemax). :mod:`~ebmclassifier.latent.categorical.latent` runs every gradient
method of :mod:`ebmclassifier.latent.methods` on it, and
:mod:`~ebmclassifier.latent.categorical.networks` holds the network and its default decoder.
"""
