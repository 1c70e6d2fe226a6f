"""`dlm.lock`: what produced an adapter, and the ERROR/WARN policy for drift against it."""
