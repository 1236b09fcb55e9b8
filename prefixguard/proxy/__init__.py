"""The transparent proxy: a mitmproxy addon (addon.py), its SSE tap (tap.py), the per-request analysis
(analysis.py), verdicts (verdict.py), secret redaction (redact.py), and the runner and commands."""
