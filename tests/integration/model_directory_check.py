#!/usr/bin/python3
"""A `mirrored export --out DIR` model directory as Hugging Face's tools read it:
- model.safetensors opened with the `safetensors` package (numpy), each tensor's shape the
  one GPT2LMHeadModel's state dict has for config.json's sizes;
- config.json's GPT2Config fields equal to the shape given on the command line (the model
  mirrored trained), model_type gpt2, architectures [GPT2LMHeadModel];
- with a tokenizer.model: sentencepiece's SentencePieceProcessor, line by line as
  docs/language-model.md says, encodes TEXT to the ids mirrored printed (IDS);
- when transformers and torch import: GPT2LMHeadModel.from_pretrained(DIR) gives the logits
  mirrored computed (LOGITS.npy, `generate --logits_out`) for IDS within 1e-5.
usage: model_directory_check.py DIR LAYERS HEADS WIDTH CONTEXT VOCAB LOGITS.npy IDS TEXT
Exits 77 with the reason when the safetensors package cannot be imported; prints SKIP for
the parts whose packages are missing."""
import json
import os
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"SKIP: {e} (pip install safetensors numpy to check the directory)")
    sys.exit(77)

directory = sys.argv[1]
layers, heads, width, context, vocab = (int(v) for v in sys.argv[2:7])
logits_path, id_list, text = sys.argv[7], sys.argv[8], sys.argv[9]
ids = [int(t) for t in id_list.split(",")]

with open(os.path.join(directory, "config.json")) as f:
    config = json.load(f)
expected = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": layers, "n_head": heads,
            "n_embd": width, "n_positions": context, "n_ctx": context, "vocab_size": vocab, "n_inner": 4 * width,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
for key, value in expected.items():
    if config.get(key) != value:
        sys.exit(f"FAIL: config.json {key} = {config.get(key)!r}, expected {value!r}")
with open(os.path.join(directory, "generation_config.json")) as f:
    generation = json.load(f)
if generation.get("max_length") != context:
    sys.exit(f"FAIL: generation_config.json max_length = {generation.get('max_length')!r}, expected {context}")

tensors = load_file(os.path.join(directory, "model.safetensors"))
shapes = {"transformer.wte.weight": (vocab, width), "transformer.wpe.weight": (context, width),
          "transformer.ln_f.weight": (width,), "transformer.ln_f.bias": (width,)}
for n in range(layers):
    p = f"transformer.h.{n}."
    shapes.update({p + "ln_1.weight": (width,), p + "ln_1.bias": (width,), p + "ln_2.weight": (width,),
                   p + "ln_2.bias": (width,), p + "attn.c_attn.weight": (width, 3 * width),
                   p + "attn.c_attn.bias": (3 * width,), p + "attn.c_proj.weight": (width, width),
                   p + "attn.c_proj.bias": (width,), p + "mlp.c_fc.weight": (width, 4 * width),
                   p + "mlp.c_fc.bias": (4 * width,), p + "mlp.c_proj.weight": (4 * width, width),
                   p + "mlp.c_proj.bias": (width,)})
if set(tensors) != set(shapes):
    sys.exit(f"FAIL: tensors {sorted(set(tensors) ^ set(shapes))} are extra or missing")
for name, shape in shapes.items():
    if tensors[name].shape != shape or tensors[name].dtype != np.float32:
        sys.exit(f"FAIL: {name} is {tensors[name].dtype} {tensors[name].shape}, expected float32 {shape}")
print(f"ok: safetensors reads {len(tensors)} tensors of the shapes config.json gives")

tokenizer = os.path.join(directory, "tokenizer.model")
if os.path.exists(tokenizer):
    try:
        import sentencepiece as spm
    except ImportError as e:
        print(f"SKIP: the tokenizer check: {e}")
    else:
        sp = spm.SentencePieceProcessor(model_file=tokenizer)
        # mirrored encodes each line, its line break included, on its own (docs/language-model.md).
        lines = text.split("\n")
        theirs = [i for n, line in enumerate(lines)
                  for i in sp.encode(line + ("\n" if n + 1 < len(lines) else ""))]
        if theirs != ids:
            sys.exit(f"FAIL: sentencepiece encodes {text!r} to {theirs}, mirrored to {ids}")
        print(f"ok: sentencepiece {spm.__version__} encodes the prompt to mirrored's {len(ids)} ids")

try:
    import torch
    from transformers import GPT2LMHeadModel
    import transformers
except ImportError as e:
    print(f"SKIP: from_pretrained: {e} (pip install torch transformers to compare logits)")
    sys.exit(0)
torch.set_num_threads(1)
model = GPT2LMHeadModel.from_pretrained(directory).eval()
with torch.no_grad():
    theirs = model(torch.tensor([ids])).logits[0].numpy()
ours = np.load(logits_path)
if ours.shape != theirs.shape:
    sys.exit(f"FAIL: mirrored's logits have shape {ours.shape}, transformers' {theirs.shape}")
diff = float(np.abs(ours - theirs).max())
print(f"transformers {transformers.__version__}, torch {torch.__version__}: GPT2LMHeadModel.from_pretrained, "
      f"{ours.shape[0]} positions x {ours.shape[1]} tokens, max |mirrored - transformers| = {diff:.3g}")
if not diff <= 1e-5:
    sys.exit("FAIL: the logits differ by more than 1e-5")
