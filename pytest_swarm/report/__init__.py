"""Reports: terminal and Markdown text, JSON, the HTML page and its charts, the pytest-benchmark bridge."""
