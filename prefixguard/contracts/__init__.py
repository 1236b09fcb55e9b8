"""The providers' contracts and prices: rules/ (installed as prefixguard.rules) read once into typed
objects. What a provider caches, from how many tokens, for how long, at what price, and what a
self-hosted server (vLLM, SGLang) says of its own prefix cache. Numbers live in rules/, never here."""
