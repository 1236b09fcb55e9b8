"""Lint the application code that builds prompts, not only the bodies it sends. Python is read with the
standard library's ast, TypeScript and JavaScript with tree-sitter (typescript.py, tsexpr.py: read as
the same ast); nothing is run. Values are followed within a function (flow.py), through assignments,
f-strings and template literals, .format, % and +, the returns of helpers in the same file or imported
from another file of the linted tree (project.py), and into a helper that sends the prompt, from
volatile sources (sources.py: clock, uuid, random, per-request ids and environment values, sets and
registries iterated, JSON written without sorted keys) to the SDK calls that send a prompt (sinks.py).
Each flow that lands in the cached part of a prompt is reported under a PG6 rule that names the body
rule it predicts (verdict.py); fix.py rewrites the mechanical cases; confirm.py confirms a finding with
the bodies a prefixguard.testing.Recorder captured."""
