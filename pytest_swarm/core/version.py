"""The plugin's version, at the bottom, so what stamps it need not import the package's public names."""

__version__ = "0.1.0"
