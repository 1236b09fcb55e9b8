"""The CI linter: rules from rules/catalog.toml run over request bodies and captures.

For other parts of prefixguard: `check_prompt(prompt, codes)` runs the single-request rules on a Prompt;
`lint(paths, settings)` runs everything over files, as `prefixguard lint` does.
"""
