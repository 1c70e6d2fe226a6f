"""`manifest.json`: inputs bound to outputs by hash."""
