"""Collection of the doctests (``--doctest-modules`` over ``ebmclassifier/``, pyproject.toml)."""

# Importing it runs the command line.
collect_ignore = ["ebmclassifier/__main__.py"]
