"""Capture: the proxy's record of traffic and its readers. One typed record (record.py: verdict, causes,
pointer, note, diagnosis as fields, never text to parse), its table columns and migrations (columns.py; the
formats before version 6 read once, in legacy.py), one store interface (store.py: `open_capture`) with a
SQLite file (sqlite.py, the default) and PostgreSQL (postgres.py, a fleet) behind it, the JSONL export, the
reader every command uses (reader.py), and the labels (client, call site) a row carries (attribution.py)."""
