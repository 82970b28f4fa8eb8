"""The version of convergent, in a module of its own so that any part can read it cheaply."""

__version__ = "0.1.0"
