"""`prefixguard report`: the diagnosis of a capture, on the terminal and as a self-contained HTML page."""
