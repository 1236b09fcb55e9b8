"""JSON Schemas of every JSON output of prefixguard (tests validate real outputs against them)."""
