#!/usr/bin/env python3
"""Prints EXP2_J64 for src/backend/webgpu/shaders/lib/numerics.wgsl: 2^(j/64), j = 0..63, as
double-float pairs (hi = the f32 nearest the 80-digit value, lo = the f32 nearest the remainder),
each literal checked to parse back to the same f32."""
import struct
from decimal import Decimal, getcontext

getcontext().prec = 80


def f32(x):
    return struct.unpack('f', struct.pack('f', float(x)))[0]


def literal(x):
    s = format(x, '.9g')
    if 'e' not in s and '.' not in s:
        s += '.0'
    assert f32(float(s)) == x, s
    return s


for j in range(64):
    v = Decimal(2) ** (Decimal(j) / Decimal(64))
    hi = f32(v)
    lo = f32(v - Decimal(hi))
    print(f"    vec2<f32>({literal(hi)}, {literal(lo)}),")
