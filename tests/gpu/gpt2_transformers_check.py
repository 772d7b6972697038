#!/usr/bin/env python3
"""gpt2_decode against Hugging Face transformers' GPT2Model (docs/PERFORMANCE.md, lesson 11).

Reads the step that Gpt2DecodeGpu.WritesAStepForTransformers wrote (x entering block 0, the
weights in model.h's layout, the K and V caches, every level's y), builds a GPT2Model from a
config (no download: C = 768, 12 layers of 12 heads, tanh GELU, eps 1e-5, no dropout, zero
position embeddings so that inputs_embeds = x), loads the same weights (its Conv1D layers hold
W transposed), hands it the cached positions as past key values, and compares its last hidden
state (after ln_f, in float64) with each level's y: relative L2 error within the lesson's
tolerance. Prints "gpt2_transformers: passed" when every level agrees.

  gpt2_transformers_check.py DIR
"""
import json
import math
import os
import sys

import numpy as np
import torch

C, H, D, LAYERS, F4 = 768, 12, 64, 12, 3072


def layer_slices():
    """model.h's LayerLayout: name -> (offset, shape) inside one layer's weights."""
    out, at = {}, 0
    for name, shape in (("ln1_g", (C,)), ("ln1_b", (C,)), ("w_qkv", (3 * C, C)), ("b_qkv", (3 * C,)),
                        ("w_proj", (C, C)), ("b_proj", (C,)), ("ln2_g", (C,)), ("ln2_b", (C,)),
                        ("w_fc", (F4, C)), ("b_fc", (F4,)), ("w_out", (C, F4)), ("b_out", (C,))):
        out[name] = (at, shape)
        at += int(np.prod(shape))
    return out, at


def main():
    folder = sys.argv[1]
    meta = json.load(open(os.path.join(folder, "meta.json")))
    s, t = meta["cache"], meta["tokens"]
    load = lambda name: torch.from_numpy(np.fromfile(os.path.join(folder, name + ".f32"),
                                                     dtype=np.float32)).double()
    weights, x = load("weights"), load("x").view(t, C)
    positions = s + t
    k_cache = load("k_cache").view(LAYERS, H, positions, D)[:, :, :s]
    v_cache = load("v_cache").view(LAYERS, H, positions, D)[:, :, :s]

    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(vocab_size=1, n_positions=positions, n_embd=C, n_layer=LAYERS, n_head=H,
                        n_inner=F4, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config._attn_implementation = "eager"
    model = GPT2Model(config).double().eval()
    slices, size = layer_slices()
    state = {"wpe.weight": torch.zeros(positions, C, dtype=torch.float64)}
    for l in range(LAYERS):
        w = lambda name: weights[l * size + slices[name][0]:][:int(np.prod(slices[name][1]))] \
            .view(slices[name][1])
        p = f"h.{l}."
        state.update({p + "ln_1.weight": w("ln1_g"), p + "ln_1.bias": w("ln1_b"),
                      p + "attn.c_attn.weight": w("w_qkv").t(), p + "attn.c_attn.bias": w("b_qkv"),
                      p + "attn.c_proj.weight": w("w_proj").t(), p + "attn.c_proj.bias": w("b_proj"),
                      p + "ln_2.weight": w("ln2_g"), p + "ln_2.bias": w("ln2_b"),
                      p + "mlp.c_fc.weight": w("w_fc").t(), p + "mlp.c_fc.bias": w("b_fc"),
                      p + "mlp.c_proj.weight": w("w_out").t(), p + "mlp.c_proj.bias": w("b_out")})
    final = LAYERS * size
    state["ln_f.weight"], state["ln_f.bias"] = weights[final:final + C], weights[final + C:final + 2 * C]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if m != "wte.weight" and not m.endswith(".attn.bias")
               and not m.endswith(".attn.masked_bias")]
    if missing or unexpected:
        print(f"gpt2_transformers: state dict mismatch: missing {missing}, unexpected {unexpected}")
        return 1

    from transformers import DynamicCache
    try:
        past = DynamicCache(config=config)
    except TypeError:
        past = DynamicCache()
    for l in range(LAYERS):
        past.update(k_cache[l][None].contiguous(), v_cache[l][None].contiguous(), l)
    with torch.no_grad():
        out = model(inputs_embeds=x[None], past_key_values=past, use_cache=True,
                    position_ids=torch.arange(s, positions)[None],
                    cache_position=torch.arange(s, positions))
    ref = out.last_hidden_state[0]
    ok = True
    for level in range(meta["levels"]):
        y = load(f"y_level{level}").view(t, C)
        err = math.sqrt(float(((y - ref) ** 2).sum()) / float((ref ** 2).sum()))
        good = math.isfinite(err) and err <= meta["tolerance"]
        ok &= good
        print(f"gpt2_transformers: cache {s}, {t} tokens, level {level}: rel L2 error {err:.3g} "
              f"against GPT2Model{'' if good else '  FAILED'}")
    import transformers
    print(f"gpt2_transformers: transformers {transformers.__version__}, torch {torch.__version__}")
    print("gpt2_transformers: passed" if ok else "gpt2_transformers: failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
