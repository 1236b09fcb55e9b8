"""The transparent proxy: a mitmproxy addon (addon.py) that never alters, delays or fails a flow, its SSE
tap (tap.py), trailers and content encodings passed as they are (trailers.py, encoding.py), and routing
(route.py). The per-request analysis (analysis.py, on what flow.py describes) runs in a process of its
own (process.py), fed by the addon's handle on it (worker.py) over framed pipes (frames.py) and a spool
that survives either side's death (spool.py). Secrets are removed before anything is kept (redact.py);
serve.py runs it all, ask.py asks a provider for its own diagnosis."""
