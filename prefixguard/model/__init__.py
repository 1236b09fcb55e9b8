"""The prompt model: what one request is, whatever its provider, and what its provider said of it.
A request becomes a `Prompt` of ordered `Segment`s (system text, tools, messages, images, documents)
with their exact bytes, digests and token counts; `usage` is what the provider billed and read,
`diagnosis` its own account of a miss. Cache breakpoints, volatile values (timestamps, ids) and media
token estimates are read here too. Nothing here judges: judge/ does."""
