"""Test helpers: a recorded-traffic upstream, fault injection, the example-request generator."""
