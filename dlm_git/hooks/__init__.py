"""Git hooks that enforce the determinism contract at commit and push time.

Invariant: nothing on a hook's path imports torch, transformers, peft or dvc.
"""
