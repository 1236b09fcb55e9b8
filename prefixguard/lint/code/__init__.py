"""Lint the application code that builds prompts, not only the bodies it sends: Python source is read
with the standard library's ast (nothing is run), values are followed within a function, through simple
assignments, f-strings, .format, % and + and the returns of helpers in the same module, from volatile
sources (sources.py: clock, uuid, random, per-request ids and environment values, unsorted sets and dict
views, json.dumps without sort_keys) to the SDK calls that send a prompt (sinks.py), and each flow that
lands in the cached part of a prompt is reported under a PG6 rule that names the body rule it predicts.
fix.py rewrites the mechanical cases."""
