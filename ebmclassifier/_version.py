"""The version of ebmclassifier, written once: the package, ``saving`` and pyproject read it."""

__version__ = "0.1.0.dev0"
