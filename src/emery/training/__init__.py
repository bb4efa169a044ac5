"""SFT jobs that change a local model's weights (DESIGN §2 ``training/``).

torch, transformers, peft and trl (the ``train`` extra) are imported only by the modules
that train (``base_model``, ``trainer``); data loading, name mapping and the GGUF adapter
writer work without them.
"""
