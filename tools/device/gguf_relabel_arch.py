#!/usr/bin/env python3
"""Relabels a GGUF file's architecture in place: general.architecture OLD -> NEW and every key
"OLD.x" -> "NEW.x". Tensor infos and data stay byte for byte where they are: the key/value section
keeps its size, the bytes the shorter names free going to one added string key, tern.relabel.pad
(so NEW must be at least 36 bytes shorter in all; cuda_peers_run.sh turns tern synth's
"bitnet-b1.58" 2B4T file into mainline llama.cpp's "bitnet", which frees 6 bytes per key).

Usage: gguf_relabel_arch.py FILE NEW_ARCH
Only for files made to be benchmarked: what NEW_ARCH means to a reader may differ (llama.cpp's and
tern's "bitnet" use a SiLU FFN where BitNet b1.58 2B4T's "bitnet-b1.58" uses ReLU^2).
"""
import struct
import sys

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
PAD_KEY = b"tern.relabel.pad"


def fail(msg):
    sys.exit(f"gguf_relabel_arch: {msg}")


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.data):
            fail("the file ends inside its key/value section")
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self):
        n = self.take("Q")
        if self.pos + n > len(self.data):
            fail("a string runs past the end of the file")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip_value(self, vtype):
        if vtype in SCALAR:
            self.take(SCALAR[vtype])
        elif vtype == STRING:
            self.string()
        elif vtype == ARRAY:
            etype, count = self.take("I"), self.take("Q")
            if etype in SCALAR:
                size = struct.calcsize("<" + SCALAR[etype]) * count
                if self.pos + size > len(self.data):
                    fail("an array runs past the end of the file")
                self.pos += size
            else:
                for _ in range(count):
                    self.skip_value(etype)
        else:
            fail(f"unknown value type {vtype}")


def gguf_str(b):
    return struct.pack("<Q", len(b)) + b


def main():
    if len(sys.argv) != 3:
        fail("usage: gguf_relabel_arch.py FILE NEW_ARCH")
    path, new = sys.argv[1], sys.argv[2].encode()
    with open(path, "r+b") as f:
        head = f.read(64 << 20)  # (the key/value section: the vocabulary is a few MB)
        if head[:4] != b"GGUF":
            fail(f"{path}: not a GGUF file (magic {head[:4]!r})")
        r = Reader(head)
        r.pos = 4
        version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
        if version != 3:
            fail(f"{path}: GGUF version {version}, expected 3")
        start = r.pos
        kvs = []  # (key, type, raw value bytes)
        old = None
        for _ in range(n_kv):
            key, vtype = r.string(), r.take("I")
            v0 = r.pos
            r.skip_value(vtype)
            kvs.append((key, vtype, head[v0:r.pos]))
            if key == b"general.architecture" and vtype == STRING:
                old = head[v0 + 8:r.pos]
        end = r.pos
        if old is None:
            fail(f"{path}: no general.architecture")
        if any(k == PAD_KEY for k, _, _ in kvs):
            fail(f"{path}: already relabelled (has {PAD_KEY.decode()})")
        out = b""
        for key, vtype, raw in kvs:
            if key == b"general.architecture":
                raw = gguf_str(new)
            elif key.startswith(old + b"."):
                key = new + key[len(old):]
            out += gguf_str(key) + struct.pack("<I", vtype) + raw
        spare = (end - start) - len(out) - (8 + len(PAD_KEY) + 4 + 8)
        if spare < 0:
            fail(f"'{new.decode()}' frees too few bytes against '{old.decode()}' to relabel in place")
        out += gguf_str(PAD_KEY) + struct.pack("<I", STRING) + gguf_str(b" " * spare)
        assert len(out) == end - start
        f.seek(16)
        f.write(struct.pack("<Q", n_kv + 1))
        f.seek(start)
        f.write(out)
    print(f"gguf_relabel_arch: {path}: {old.decode()} -> {new.decode()} ({n_tensors} tensors unchanged)")


if __name__ == "__main__":
    main()
