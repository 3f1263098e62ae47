"""Root conftest: the plugin's own test helpers (pytester) come from pyproject's addopts."""
