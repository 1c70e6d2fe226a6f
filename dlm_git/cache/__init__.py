"""The tokenized-section cache: unchanged rows are never tokenized twice."""
