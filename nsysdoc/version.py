"""nsysdoc's version, on the ground floor: every module that writes it into a result, a page, a
cache key or ``--version`` imports it from here, never from the package face (``nsysdoc``, whose
``__getattr__`` hands over the public API and would tie every such module to it). Keep it equal to
``version`` in pyproject.toml."""
__version__ = "0.1.0"
