"""The transparent proxy: a mitmproxy addon (addon.py; its options in options.py; the header fields it reads
and the x-prefixguard-* fields it adds in headers.py) that never delays or fails a flow, nor alters one unless
asked to (ask.py: the provider's own diagnosis, opt-in), its SSE tap (tap.py), trailers passed as they are
(trailers.py), content encodings undone for the analysis (encoding.py), and routing (route.py).
The per-request analysis (analysis.py, on what flow.py describes) runs in a process of its own
(process.py), fed by the addon's handle on it (worker.py) over framed pipes (frames.py) and a spool that
survives either side's death (spool.py). Secrets are removed before anything is kept (redact.py);
serve.py runs mitmproxy with the addon."""
