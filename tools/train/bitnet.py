"""A BitNet b1.58 decoder with exactly tern's architecture (FORMATS.md §4.6), for quantization-aware training.

Per layer:  h = RMSNorm(x) * attn_norm
            q, k, v = BitLinear(h);  NeoX RoPE on q, k;  causal GQA attention
            x = x + BitLinear_o(RMSNorm(attn) * attn_sub_norm)
            h = RMSNorm(x) * ffn_norm
            x = x + BitLinear_down(RMSNorm(relu(BitLinear_gate(h))^2 * BitLinear_up(h)) * ffn_sub_norm)
Head: logits = (RMSNorm(x) * output_norm) @ token_embd^T (tied), no scaling.

BitLinear (BitNet b1.58): weights ternarised by absmean with one scale per matrix,
t = clamp(round(W / mean|W|), -1, 1); activations quantised per token to int8 by absmax,
q = clamp(round(x * 127 / max|x|), -128, 127). Training uses the straight-through estimator;
`exact=True` computes the integer product in float32 exactly, as tern does at inference.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def weight_quant(w):
    """Returns (ternary t, scale) with t * scale the absmean-quantised weight."""
    scale = w.abs().mean().clamp(min=1e-5)
    t = (w / scale).round().clamp(-1, 1)
    return t, scale


def act_quant(x):
    """Returns (q, s) with q = clamp(round(x * s), -128, 127), s = 127 / max|x| per token."""
    s = 127.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    q = (x * s).round().clamp(-128, 127)
    return q, s


class BitLinear(nn.Linear):
    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out, bias=False)
        self.exact = False

    def forward(self, x):
        t, w_scale = weight_quant(self.weight)
        q, s = act_quant(x)
        if self.exact:
            # Integers times ternary values summed in float32 are exact below 2^24; then the same
            # epilogue as tern: (dot / s) * scale.
            return F.linear(q, t) / s * w_scale
        # Straight-through estimators: forward with quantised values, backward as identity.
        w = self.weight + (t * w_scale - self.weight).detach()
        xq = x + (q / s - x).detach()
        return F.linear(xq, w)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(n_ctx, head_dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(n_ctx, device=device, dtype=torch.float32), inv)  # [n_ctx, head_dim/2]
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    """NeoX (split-half) rotation of pairs (i, i + head_dim/2). x: [B, H, T, D]."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    c, s = cos[: x.shape[2]].to(x.dtype), sin[: x.shape[2]].to(x.dtype)
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["n_embd"], c["n_embd"] // c["n_head"]
        self.n_head, self.n_head_kv, self.hd = c["n_head"], c["n_head_kv"], hd
        self.attn_norm = RMSNorm(d, c["eps"])
        self.q = BitLinear(d, c["n_head"] * hd)
        self.k = BitLinear(d, c["n_head_kv"] * hd)
        self.v = BitLinear(d, c["n_head_kv"] * hd)
        self.attn_sub_norm = RMSNorm(d, c["eps"])
        self.o = BitLinear(d, d)
        self.ffn_norm = RMSNorm(d, c["eps"])
        self.gate = BitLinear(d, c["n_ff"])
        self.up = BitLinear(d, c["n_ff"])
        self.ffn_sub_norm = RMSNorm(c["n_ff"], c["eps"])
        self.down = BitLinear(c["n_ff"], d)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.k(h).view(B, T, self.n_head_kv, self.hd).transpose(1, 2)
        v = self.v(h).view(B, T, self.n_head_kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.n_head // self.n_head_kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(B, T, -1)
        x = x + self.o(self.attn_sub_norm(a))
        h = self.ffn_norm(x)
        f = F.relu(self.gate(h)).square() * self.up(h)
        return x + self.down(self.ffn_sub_norm(f))


class BitnetLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["n_vocab"], c["n_embd"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.norm = RMSNorm(c["n_embd"], c["eps"])
        nn.init.normal_(self.embed.weight, std=0.02)
        for m in self.modules():
            if isinstance(m, BitLinear):
                nn.init.normal_(m.weight, std=1.0 / math.sqrt(m.in_features))
        self.rope = None

    def set_exact(self, exact):
        for m in self.modules():
            if isinstance(m, BitLinear):
                m.exact = exact

    def forward(self, ids):
        if self.rope is None or self.rope[0].shape[0] < ids.shape[1] or self.rope[0].device != ids.device:
            self.rope = rope_tables(max(ids.shape[1], self.c["n_ctx"]), self.c["n_embd"] // self.c["n_head"],
                                    self.c["rope_theta"], ids.device)
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x, *self.rope)
        return self.norm(x) @ self.embed.weight.t()
