"""Small utilities every part uses: errors and exit codes, reading input safely, terminal styling,
redaction of secrets, summary statistics and the on-disk cache of token counts and parsed rules."""
