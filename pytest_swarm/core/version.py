"""The plugin's version, written once: at the bottom, so the reports and the results store that stamp it on what they
write import it without importing the package's public names (and the fixture behind them)."""

__version__ = "0.1.0"
