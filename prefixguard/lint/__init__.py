"""The CI linter: the rules of rules/catalog.toml run over request bodies and captures.

For other parts of prefixguard: `prefixguard.lint.linter.check_prompt(prompt, codes)` runs the
single-request rules on a Prompt and returns Hits (rule name, JSON pointer, message);
`prefixguard.lint.linter.lint(paths, settings)` runs everything over files, as `prefixguard lint` does.
"""
