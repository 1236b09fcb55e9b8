"""prefixguard inside other tools' processes (LiteLLM), reusing the proxy's analysis as it is."""
