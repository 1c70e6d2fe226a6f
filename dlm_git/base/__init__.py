"""Base models: spec parsing, the registry, the built-in tiny base, resolution and identity."""
