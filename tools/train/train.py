#!/usr/bin/env python3
"""Trains tern's default model: a small BitNet b1.58 (ternary weights, int8 activations) on public-domain
English (Moby Dick and the State of the Union addresses), and exports it as a Hugging Face BitNet
checkpoint that `tern convert` turns into the shipped GGUF.

Runs on the lent GPU machine (PyTorch, tokenizers and transformers are there; see tools/train/README.md):
    python3 tools/train/train.py --data .deps/train/data --out /tmp/run --tar $OUT/run.tar.gz

Steps: (1) byte-level BPE tokenizer trained on the training split (Llama-3 pre-tokenizer regex, ignore
merges), (2) quantization-aware training with the straight-through estimator, bf16 autocast, AdamW,
warm-up + cosine schedule, dropout on the residual branches, evaluation on held-out text every few
hundred steps keeping the best weights, (3) exact evaluation (integer products in float32, as tern
computes them) on held-out chunks, (4) export: packed uint8 ternary weights + weight_scale
(autobitlinear, offline), f16 embedding, tokenizer.json, and (5) a second evaluation of the exported
folder through transformers' BitNetForCausalLM, so the numbers do not rest on this script alone.
"""
import argparse
import json
import math
import os
import random
import sys
import tarfile
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bitnet import BitLinear, BitnetLM, weight_quant  # noqa: E402

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def train_tokenizer(texts, vocab_size):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def eval_chunks(tok, docs, max_tokens):
    """Held-out text cut at paragraph boundaries into chunks of at most max_tokens tokens (with BOS)."""
    chunks = []
    for d in docs:
        cur = ""
        for para in d["text"].split("\n\n"):
            cand = (cur + "\n\n" + para) if cur else para
            if len(tok.encode(cand, add_special_tokens=False).ids) + 1 <= max_tokens:
                cur = cand
                continue
            if cur:
                chunks.append(cur)
            cur = para if len(tok.encode(para, add_special_tokens=False).ids) + 1 <= max_tokens else ""
        if cur:
            chunks.append(cur)
    return chunks


@torch.no_grad()
def eval_nll(model, seqs, device, exact=True):
    """Mean NLL (nats) over every predicted token of each [BOS, ...] sequence, one sequence at a time."""
    model.eval()
    model.set_exact(exact)
    total, count = 0.0, 0
    for ids in seqs:
        x = torch.tensor([ids], device=device)
        logits = model(x)[0, :-1].float()
        total += F.cross_entropy(logits, x[0, 1:], reduction="sum").item()
        count += len(ids) - 1
    model.set_exact(False)
    model.train()
    return total / count, count


def pack_hf(t):
    """Ternary [out, in] -> uint8 [out/4, in]: row quarter q in bits 2q+1..2q, value + 1 (HF layout)."""
    p = t.shape[0] // 4
    codes = (t + 1).to(torch.uint8)
    out = torch.zeros((p, t.shape[1]), dtype=torch.uint8)
    for q in range(4):
        out |= codes[q * p:(q + 1) * p] << (2 * q)
    return out


def export(model, tok, cfg, folder, bos, eos):
    os.makedirs(folder, exist_ok=True)
    state = {"model.embed_tokens.weight": model.embed.weight.detach().cpu().half().contiguous(),
             "model.norm.weight": model.norm.weight.detach().cpu().float().contiguous()}
    names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
             "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
    norms = {"attn_norm": "input_layernorm", "attn_sub_norm": "self_attn.attn_sub_norm",
             "ffn_norm": "post_attention_layernorm", "ffn_sub_norm": "mlp.ffn_sub_norm"}
    for i, b in enumerate(model.blocks):
        p = f"model.layers.{i}."
        for ours, theirs in names.items():
            t, scale = weight_quant(getattr(b, ours).weight.detach().float().cpu())
            state[p + theirs + ".weight"] = pack_hf(t.to(torch.int8)).contiguous()
            state[p + theirs + ".weight_scale"] = scale.reshape(1).float()
        for ours, theirs in norms.items():
            state[p + theirs + ".weight"] = getattr(b, ours).weight.detach().cpu().float().contiguous()
    save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["BitNetForCausalLM"], "model_type": "bitnet", "hidden_act": "relu2",
        "vocab_size": cfg["n_vocab"], "hidden_size": cfg["n_embd"], "intermediate_size": cfg["n_ff"],
        "num_hidden_layers": cfg["n_layer"], "num_attention_heads": cfg["n_head"],
        "num_key_value_heads": cfg["n_head_kv"], "max_position_embeddings": cfg["n_ctx"],
        "rms_norm_eps": cfg["eps"], "rope_theta": cfg["rope_theta"], "tie_word_embeddings": True,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": eos, "torch_dtype": "float32",
        "quantization_config": {"quant_method": "bitnet", "linear_class": "autobitlinear",
                                "quantization_mode": "offline"},
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True}, f, indent=1)


@torch.no_grad()
def transformers_nll(folder, seqs, device):
    """Mean NLL of the exported folder as transformers' BitNetForCausalLM computes it (float32)."""
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    from transformers import BitNetForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = BitNetForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").to(device).eval()
    total, count = 0.0, 0
    for ids in seqs:
        x = torch.tensor([ids], device=device)
        logits = m(x).logits[0, :-1].float()
        total += F.cross_entropy(logits, x[0, 1:], reduction="sum").item()
        count += len(ids) - 1
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--n-embd", type=int, default=512)
    ap.add_argument("--n-layer", type=int, default=10)
    ap.add_argument("--n-head", type=int, default=8)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--n-ff", type=int, default=1536)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--epochs", type=float, default=12)
    ap.add_argument("--minutes", type=float, default=5.0, help="training time cap")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t_start = time.time()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    train_docs = read_jsonl(os.path.join(args.data, "train.jsonl"))
    held_docs = read_jsonl(os.path.join(args.data, "heldout.jsonl"))
    log(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), torch {torch.__version__}")
    log(f"{len(train_docs)} train documents, {len(held_docs)} held-out documents")

    tok = train_tokenizer([d["text"] for d in train_docs], args.vocab)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    log(f"tokenizer: {tok.get_vocab_size()} tokens (BOS {bos}, EOS {eos})")

    stream = []
    for d in train_docs:
        stream += [bos] + tok.encode(d["text"], add_special_tokens=False).ids + [eos]
    data = torch.tensor(stream, dtype=torch.long)
    chunks = eval_chunks(tok, held_docs, args.ctx)
    held = [[bos] + tok.encode(c, add_special_tokens=False).ids for c in chunks]
    n_held = sum(len(s) - 1 for s in held)
    log(f"train stream {len(stream)} tokens; held-out {len(chunks)} chunks, {n_held} predicted tokens")

    # Unigram baseline: training-set token frequencies (add-one smoothing) on the held-out tokens.
    counts = torch.bincount(data, minlength=args.vocab).double() + 1
    logp = (counts / counts.sum()).log()
    unigram_nll = -sum(logp[s[1:]].sum().item() for s in held) / n_held

    cfg = {"n_vocab": tok.get_vocab_size(), "n_embd": args.n_embd, "n_layer": args.n_layer, "n_head": args.n_head,
           "n_head_kv": args.n_head_kv, "n_ff": args.n_ff, "n_ctx": args.ctx, "eps": 1e-5, "rope_theta": 10000.0}
    model = BitnetLM(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_ternary = sum(m.weight.numel() for m in model.modules() if isinstance(m, BitLinear))
    log(f"model: {n_params / 1e6:.1f}M parameters ({n_ternary / 1e6:.1f}M ternary)")

    # Dropout on the residual branches during training only (inference has none).
    if args.dropout > 0:
        for b in model.blocks:
            for lin in (b.o, b.down):
                lin.register_forward_hook(lambda mod, inp, out: F.dropout(out, args.dropout, mod.training))

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    tokens_per_step = args.batch * args.ctx
    total_steps = int(args.epochs * len(stream) / tokens_per_step)
    warmup = max(1, total_steps // 50)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        prog = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))

    gen = torch.Generator().manual_seed(args.seed)
    history, evals = [], []
    best = (float("inf"), None, -1)
    t_train = time.time()
    step = 0
    model.train()
    while step < total_steps and time.time() - t_train < args.minutes * 60:
        starts = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=gen)
        batch = torch.stack([data[s:s + args.ctx + 1] for s in starts.tolist()]).to(device, non_blocking=True)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 20 == 0:
            history.append({"step": step, "loss": round(loss.item(), 4), "lr": lr_at(step),
                            "seconds": round(time.time() - t_train, 1)})
        if step % args.eval_every == 0 or step == total_steps:
            nll, _ = eval_nll(model, held[:48], device)
            evals.append({"step": step, "heldout_nll": round(nll, 4), "seconds": round(time.time() - t_train, 1)})
            log(f"step {step}/{total_steps} loss {loss.item():.3f} held-out nll {nll:.4f} "
                f"({tokens_per_step * step / (time.time() - t_train):.0f} tok/s)")
            if nll < best[0]:
                best = (nll, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
    train_seconds = time.time() - t_train
    if best[1] is not None:
        model.load_state_dict(best[1])
    log(f"trained {step} steps in {train_seconds:.0f} s; best held-out step {best[2]}")

    # Final figures in plain float32 (no TF32), and with the f16 embedding the shipped file stores.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        model.embed.weight.copy_(model.embed.weight.half().float())
    nll_exact, _ = eval_nll(model, held, device, exact=True)
    folder = os.path.join(args.out, "checkpoint")
    export(model, tok, cfg, folder, bos, eos)
    nll_hf = transformers_nll(folder, held, device)
    os.makedirs(os.path.join(args.out, "heldout"), exist_ok=True)
    for i, c in enumerate(chunks):
        with open(os.path.join(args.out, "heldout", f"chunk_{i:03d}.txt"), "w", encoding="utf-8") as f:
            f.write(c)
    chunk_nll = []
    for s in held:  # per-chunk figures, so any subset can be compared with tern perplexity
        n, _ = eval_nll(model, [s], device, exact=True)
        chunk_nll.append(round(n, 6))

    metrics = {
        "args": vars(args), "config": cfg, "n_params": n_params, "n_ternary": n_ternary,
        "train_tokens": len(stream), "steps": step, "tokens_seen": step * tokens_per_step,
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - t_start, 1),
        "best_step": best[2], "heldout_chunks": len(chunks), "heldout_tokens": n_held,
        "heldout_nll_exact": nll_exact, "heldout_ppl_exact": math.exp(nll_exact),
        "heldout_ppl_transformers": math.exp(nll_hf), "unigram_ppl": math.exp(unigram_nll),
        "chunk_nll_exact": chunk_nll, "chunk_tokens": [len(s) for s in held],
        "loss_history": history, "evals": evals,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
    }
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    log(f"held-out ppl: exact {math.exp(nll_exact):.3f}, transformers {math.exp(nll_hf):.3f}, "
        f"unigram {math.exp(unigram_nll):.1f}")
    with tarfile.open(args.tar, "w:gz") as tar:
        tar.add(args.out, arcname="train_run")


if __name__ == "__main__":
    main()
