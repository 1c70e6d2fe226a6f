---
dlm_id: 01M800GRBP0GEV3WAMXAHDD42B
dlm_version: 1
base_model: builtin:tiny
system_prompt: You answer questions about reproducible model training, briefly.
training:
  lora_r: 8
  lora_alpha: 16
  lora_dropout: 0.0
  sequence_len: 128
  micro_batch_size: 4
  grad_accum: 1
  learning_rate: 0.002
  num_epochs: 1
  max_steps: 24
  seed: 42
  lr_scheduler: linear
  warmup_ratio: 0.1
  sources:
    - path: notes
      include: ["*.md", "*.txt"]
      max_bytes_per_file: 65536
---

# Reproducible adapters

A reproducible adapter is one that anyone can rebuild from the commit that records it.
The same document, the same sources and the same base model give the same bytes.

::instruction::
### Q
What does dlm.lock record?

### A
The base model and its revision, the library versions, the hardware tier, the seed and
the determinism flags that produced the adapter.

### Q
What does manifest.json bind?

### A
Inputs to outputs by hash: the document, the sources, the tokens, the base model, the
training config and every tensor of the adapter.

::preference::
### Prompt
Should a lock file contain the time of the run?

### Chosen
No. The lock is a pure function of its inputs, so retraining leaves git status clean.

### Rejected
Yes, timestamps make every run unique.
