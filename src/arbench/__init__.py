"""arbench: associative-recall experiments on fixed-state sequence models."""

__version__ = "0.1.0"
