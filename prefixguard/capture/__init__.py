"""Capture: the proxy's record of traffic and its readers. One store interface with a SQLite file (the
default) and PostgreSQL (a fleet) behind it, the JSONL export, the reader every command uses, and the
labels (client, call site) a row carries."""
