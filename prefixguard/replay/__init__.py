"""`prefixguard replay`: traffic (captured or a public trace) replayed on a cache simulation, the local
engine or an HTTP server, to measure what prefix reuse it gets."""
