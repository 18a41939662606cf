"""Energy-based classifiers as scikit-learn estimators."""

__version__ = "0.1.0.dev0"
