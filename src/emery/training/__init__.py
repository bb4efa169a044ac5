"""SFT and RL jobs that change a local model's weights (DESIGN §2 ``training/``).

torch, transformers, peft and trl (the ``train`` extra) are imported only by the modules
that train (``base_model``, ``trainer``, ``rl_trainer``); data loading, the RL reward, name
mapping and the GGUF adapter writer work without them.
"""
