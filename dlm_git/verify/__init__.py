"""Verification: prove that recorded hashes are what the inputs and outputs really are."""
