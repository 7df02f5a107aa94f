#!/usr/bin/env python3
"""Builds small random BitNet b1.58 checkpoints with Hugging Face transformers and records their logits.

Runs on the lent GPU machine (it has PyTorch, transformers and tokenizers; everything here runs on its
CPU in float32 for determinism). For each model it:
  1. trains a small byte-level BPE tokenizer (Llama-3 pre-tokenizer regex, ignore_merges) on text
     available on that machine (Python docstrings), so `tokenizer.json` is a real HF tokenizer;
  2. builds a random float BitNetForCausalLM, ternarises the seven projections by absmean and stores them
     in the packed `autobitlinear` offline layout (uint8 [out/4, in] + weight_scale), or keeps float
     masters for the `online` variant; embeddings are rounded to f16-representable values so that
     tern's F16 token_embd holds them exactly;
  3. reloads the folder with BitNetForCausalLM.from_pretrained (the transformers code path users run),
     checks that the unpacked weights equal the intended ternary matrices, and records float32 logits
     for every position of a few prompts, 32-token greedy continuations of short prompts, tokenizer ids,
     and where activation rounding sits on a knife-edge (TieRecorder).

Output: one folder per model under --out (config.json, model.safetensors, tokenizer.json,
reference.json, logits_<i>.f32), tarred into --tar.

Usage (device): TORCHDYNAMO_DISABLE=1 python3 tools/hf_parity/make_reference.py --out /tmp/hf --tar $OUT/hf_parity.tar.gz
"""
import argparse
import inspect
import json
import os
import struct
import sys
import tarfile

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import BitNetConfig, BitNetForCausalLM  # noqa: E402
from transformers.integrations.bitnet import pack_weights as hf_pack_weights  # noqa: E402

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]

MODELS = [
    # name, hidden, layers, heads, kv heads, ffn, vocab, rope theta, eps, tied, mode
    dict(name="tiny_tied", hidden=128, layers=2, heads=4, kv_heads=2, ffn=384, vocab=384, theta=500000.0,
         eps=1e-5, tied=True, mode="offline", seed=1),
    dict(name="hd128_untied", hidden=256, layers=3, heads=2, kv_heads=1, ffn=640, vocab=512, theta=10000.0,
         eps=1e-6, tied=False, mode="offline", seed=2),
    dict(name="online_masters", hidden=128, layers=1, heads=2, kv_heads=2, ffn=256, vocab=320, theta=500000.0,
         eps=1e-5, tied=True, mode="online", seed=3),
]

PROMPTS = [
    "The ship sailed into the harbour at dawn, and the crew began to unload the cargo.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # 5",
    "Numbers like 12345 and 3.14159, symbols like @#$%, and UTF-8: café, naïve, 東京, 🙂!",
    "Return the list of names in sorted order.",
    "If the file does not exist, raise an error.",
    "   indented\tcode\n\n\nblank lines",
    "ÄÖÜ äöü ß — “quotes” and ‘apostrophes’",
    "x = [i * i for i in range(10) if i % 2]",
]
GREEDY_PROMPTS = ["The", "def", "import os", "Return a", "1 2 3"]
EXTRA_TEXTS = ["", " ", "  leading spaces", "trailing\n\n", "don't I've we'll", "Cửa Việt", "\t tabs\tand\nlines"]


SKIP_MODULES = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data", "lib2to3"}


def training_text():
    """Docstrings of the standard library: plenty of English prose and code, present on any machine."""
    chunks = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in SKIP_MODULES:
            continue
        try:
            mod = __import__(name)
        except Exception:  # noqa: BLE001 - any import problem just skips the module
            continue
        doc = inspect.getdoc(mod)
        if doc:
            chunks.append(doc)
        for _, obj in list(vars(mod).items())[:50]:
            d = inspect.getdoc(obj) if callable(obj) else None
            if d:
                chunks.append(d)
    return chunks


def make_tokenizer(vocab_size, texts):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def pack_hf(t):
    """Ternary [out, in] -> uint8 [out/4, in]: row quarter q of the matrix in bits 2q+1..2q (value + 1)."""
    out = t.shape[0]
    p = out // 4
    codes = (t + 1).to(torch.uint8)
    packed = torch.zeros((p, t.shape[1]), dtype=torch.uint8)
    for q in range(4):
        packed |= codes[q * p:(q + 1) * p] << (2 * q)
    return packed


def absmean_ternary(w):
    s = 1.0 / w.abs().mean().clamp(min=1e-5)
    t = (w * s).round().clamp(-1, 1)
    return t, (1.0 / s)


TIE_WINDOW = 1e-6  # relative: |frac(v) - 0.5| / max(|v|, 1), about 8 float32 ulps


class TieRecorder:
    """Finds the positions where some BitLinear input sits on a rounding knife-edge.

    Activation quantization rounds v = x * (127 / max|x|) to an integer. Where v is within a few ulps
    of a .5 boundary (TIE_WINDOW relative), float32 implementations that differ only in summation order (any two
    correct ones) may round differently, and the one-step difference then spreads through attention to
    every later position. Recording where this happens in transformers' own computation lets the tern
    test demand exact agreement everywhere before it and excuse only what comes after.
    """

    def __init__(self, model):
        self.handles = []
        self.dist = None
        for mod in model.modules():
            if type(mod).__name__ in ("AutoBitLinear", "BitLinear"):
                self.handles.append(mod.register_forward_pre_hook(self.hook))

    def reset(self, n):
        self.dist = [1.0] * n

    def hook(self, mod, args):
        x = args[0].detach().float()[0]  # [n, K]
        if self.dist is None or len(self.dist) != x.shape[0]:
            return  # not a pass being recorded (e.g. the greedy steps)
        s = 127 / x.abs().max(dim=-1, keepdim=True).values.clamp(min=1e-5)
        v = x * s
        d = (((v - v.floor()) - 0.5).abs() / v.abs().clamp(min=1)).min(dim=-1).values
        for p, dp in enumerate(d.tolist()):
            self.dist[p] = min(self.dist[p], dp)

    def distances(self):
        return [float(f"{d:.3g}") for d in self.dist]

    def first(self):
        """First position with a knife-edge rounding, or the sequence length if there is none."""
        first = next((p for p, d in enumerate(self.dist) if d < TIE_WINDOW), len(self.dist))
        return first

    def remove(self):
        for h in self.handles:
            h.remove()


def load_and_check(folder, spec, expected):
    """Loads with from_pretrained and lists every projection whose weights differ from the intent."""
    model = BitNetForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    problems, checked = [], 0
    for name, mod in model.named_modules():
        if (name + ".weight") not in expected:
            continue
        t, scale = expected[name + ".weight"]
        checked += 1
        if spec["mode"] != "offline":
            continue
        w = mod.weight.detach().float()
        if not torch.equal(w, t.float()):
            problems.append(f"{name}: weights differ ({type(mod).__name__})")
        ws = float(mod.weight_scale.detach().float().reshape(-1)[0]) if hasattr(mod, "weight_scale") else None
        if ws is None or abs(ws - scale) > 1e-7 * abs(scale):
            problems.append(f"{name}: weight_scale {ws} != {scale}")
    if checked != 7 * spec["layers"]:
        problems.append(f"found {checked} projections, expected {7 * spec['layers']}")
    return model, problems


def f16_exact(x):
    return x.to(torch.float16).to(torch.float32)


def build(spec, texts, root):
    torch.manual_seed(spec["seed"])
    folder = os.path.join(root, spec["name"])
    os.makedirs(folder, exist_ok=True)
    tok = make_tokenizer(spec["vocab"], texts)
    tok.save(os.path.join(folder, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    bos, eos, eot = (tok.token_to_id(s) for s in SPECIALS)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "add_bos_token": True}, f, indent=1)

    qcfg = {"quant_method": "bitnet", "linear_class": "autobitlinear", "quantization_mode": spec["mode"]}
    cfg = BitNetConfig(vocab_size=vocab, hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
                       num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                       num_key_value_heads=spec["kv_heads"], hidden_act="relu2", max_position_embeddings=256,
                       rms_norm_eps=spec["eps"], rope_theta=spec["theta"], tie_word_embeddings=spec["tied"],
                       bos_token_id=bos, eos_token_id=eos, pad_token_id=eos)
    float_model = BitNetForCausalLM(cfg).eval()
    state = {}
    expected = {}
    with torch.no_grad():
        for name, p in float_model.state_dict().items():
            x = p.detach().clone().float()
            if name.endswith("_proj.weight"):
                x = x * 8.0  # init std 0.02 -> magnitudes that exercise the scales
                if spec["mode"] == "offline":
                    t, scale = absmean_ternary(x)
                    state[name] = pack_hf(t.to(torch.int8)).contiguous()
                    theirs = hf_pack_weights(t.clone())
                    assert torch.equal(theirs, state[name]), f"{name}: pack layout differs from transformers"
                    state[name.replace(".weight", ".weight_scale")] = scale.reshape(1).float()
                    expected[name] = (t, float(scale))
                else:
                    state[name] = x.contiguous()
                    t, scale = absmean_ternary(x)
                    expected[name] = (t, float(scale))
            elif "norm" in name:
                state[name] = (1.0 + 0.2 * torch.randn_like(x)).contiguous()
            elif name in ("model.embed_tokens.weight", "lm_head.weight"):
                if name == "lm_head.weight" and spec["tied"]:
                    continue
                state[name] = f16_exact(torch.randn_like(x) * 0.5).contiguous()
            else:
                state[name] = x.contiguous()
    save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    cfg_dict = cfg.to_dict()
    cfg_dict["quantization_config"] = qcfg
    cfg_dict["architectures"] = ["BitNetForCausalLM"]
    cfg_dict["torch_dtype"] = "float32"
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=1, sort_keys=True)

    model, problems = load_and_check(folder, spec, expected)
    loaded_from = "packed"
    if problems and spec["mode"] == "offline":
        # Some transformers versions unpack uint8 checkpoints wrongly; an unpacked offline checkpoint
        # (ternary float weights + weight_scale) is the same model, so load that one for reference.
        print(f"{spec['name']}: packed load problems: {problems[:3]}; loading the unpacked copy", file=sys.stderr)
        alt = folder + "_unpacked"
        os.makedirs(alt, exist_ok=True)
        alt_state = dict(state)
        for name, (t, _) in expected.items():
            alt_state[name] = t.float().contiguous()
        save_file(alt_state, os.path.join(alt, "model.safetensors"), metadata={"format": "pt"})
        for fname in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(folder, fname), "rb") as src, open(os.path.join(alt, fname), "wb") as dst:
                dst.write(src.read())
        model, problems = load_and_check(alt, spec, expected)
        loaded_from = "unpacked"
        assert not problems, problems
    elif problems:
        raise AssertionError(problems)

    ref = {"model": spec, "hf_loaded_from": loaded_from, "transformers": transformers.__version__, "torch": torch.__version__,
           "bos": bos, "eos": eos, "eot": eot, "tie_window": TIE_WINDOW, "prompts": [], "greedy": [], "tokenizer_cases": []}
    ties = TieRecorder(model)
    with torch.no_grad():
        for i, text in enumerate(PROMPTS):
            ids = [bos] + tok.encode(text, add_special_tokens=False).ids
            ties.reset(len(ids))
            logits = model(torch.tensor([ids])).logits[0].float()
            first_tie = ties.first()
            distances = ties.distances()
            ties.dist = None
            with open(os.path.join(folder, f"logits_{i}.f32"), "wb") as f:
                f.write(struct.pack(f"<{logits.numel()}f", *logits.flatten().tolist()))
            ref["prompts"].append({"text": text, "ids": ids, "logits_file": f"logits_{i}.f32",
                                   "n_vocab": int(logits.shape[1]), "first_tie": first_tie,
                                   "tie_distance": distances})
        for text in GREEDY_PROMPTS:
            # Greedy continuation, each step a full forward pass over the whole sequence.
            ids = [bos] + tok.encode(text, add_special_tokens=False).ids
            seq = list(ids)
            for _ in range(32):
                seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
            ties.reset(len(seq))
            model(torch.tensor([seq]))
            ref["greedy"].append({"text": text, "ids": ids, "tokens": seq[len(ids):], "first_tie": ties.first()})
            ties.dist = None
    ties.remove()
    for text in PROMPTS + EXTRA_TEXTS:
        ref["tokenizer_cases"].append({"text": text, "ids": tok.encode(text, add_special_tokens=False).ids})
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    print(f"{spec['name']}: vocab {vocab}, loaded from {loaded_from}, "
          f"{sum(len(p['ids']) for p in ref['prompts'])} positions recorded, first ties "
          f"{[p['first_tie'] for p in ref['prompts']]}, greedy first ties {[g['first_tie'] for g in ref['greedy']]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    print("transformers", transformers.__version__, "torch", torch.__version__, file=sys.stderr)
    texts = training_text()
    print(f"tokenizer training text: {len(texts)} docstrings, {sum(map(len, texts))} chars", file=sys.stderr)
    for spec in MODELS:
        build(spec, texts, args.out)
    with tarfile.open(args.tar, "w:gz") as tar:
        tar.add(args.out, arcname="hf_parity")


if __name__ == "__main__":
    main()
