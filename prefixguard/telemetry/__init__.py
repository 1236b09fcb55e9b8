"""Telemetry out of prefixguard: OpenTelemetry spans (GenAI semantic conventions) and Prometheus metrics.

Both are fed from finished capture records, in the analysis process (never on the request path), and
both are optional: `pip install '.[telemetry]'` in a clone of the repository. Names live in names.py.
"""
