"""`prefixguard import`: agents' own session logs (Claude Code, Codex) into a capture store, no proxy needed."""
