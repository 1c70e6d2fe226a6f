"""Deterministic LoRA training: rows, tokenization, the loop, and writing outputs."""
