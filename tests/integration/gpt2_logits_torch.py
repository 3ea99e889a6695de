#!/usr/bin/python3
"""A `mirrored export` file in PyTorch: tests/bench/gpt_step_pytorch.py's Gpt loaded from the
safetensors file (GPT-2's names and layouts) must give the logits mirrored computed for the
same tokens (`mirrored generate --logits_out`) within 1e-5.
usage: gpt2_logits_torch.py MODEL.safetensors LOGITS.npy TOKEN,TOKEN,...
Exits 77 with the reason when torch cannot be imported."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
try:
    import numpy as np
    import torch
    from gpt_step_pytorch import load_gpt2_safetensors
except ImportError as e:
    print(f"SKIP: {e} (install Debian's python3-torch to compare with PyTorch)")
    sys.exit(77)

model_path, logits_path, token_list = sys.argv[1:4]
tokens = [int(t) for t in token_list.split(",")]
torch.set_num_threads(1)
model = load_gpt2_safetensors(model_path).eval()
with torch.no_grad():
    theirs = model(torch.tensor([tokens]))[0].numpy()
ours = np.load(logits_path)
if ours.shape != theirs.shape:
    sys.exit(f"FAIL: mirrored's logits have shape {ours.shape}, PyTorch's {theirs.shape}")
diff = float(np.abs(ours - theirs).max())
print(f"torch {torch.__version__}: {ours.shape[0]} positions x {ours.shape[1]} tokens, "
      f"max |mirrored - pytorch| = {diff:.3g}")
sys.exit(0 if diff <= 1e-5 else f"FAIL: logits differ by {diff:.3g} > 1e-5")
