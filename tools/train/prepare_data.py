#!/usr/bin/env python3
"""Turns the stdlib dataset packages into train / held-out JSONL documents (standard library only).

Split: a document is held out when its index in a fixed order is a multiple of 20 — Moby Dick
chapters 20, 40, ..., 120 and every 20th State of the Union address (by year, then file name). That
is about 5% of the text, spread over both sources and over two centuries of speeches.
"""
import argparse
import glob
import json
import os
import re


def moby_dick(root):
    docs = []
    for path in glob.glob(os.path.join(root, "datasets-moby-dick", "data", "chapter_*.json")):
        with open(path, encoding="utf-8") as f:
            ch = json.load(f)
        docs.append((int(ch["chapter"]) if str(ch["chapter"]).isdigit() else 10_000, ch["title"], ch["text"]))
    docs.sort()
    return [{"source": "moby-dick", "id": f"chapter {n}", "text": f"{title}\n\n{text}".strip()} for n, title, text in docs]


def sotu(root):
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "datasets-sotu", "data", "*.txt"))):
        name = os.path.basename(path)[:-4]
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        docs.append({"source": "sotu", "id": name, "text": re.sub(r"\r\n?", "\n", text)})
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--npm", required=True, help="node_modules/@stdlib folder")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    train, held = [], []
    for docs in (moby_dick(args.npm), sotu(args.npm)):
        for i, d in enumerate(docs):
            (held if i % 20 == 0 and i > 0 else train).append(d)
    for name, docs in (("train", train), ("heldout", held)):
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        chars = sum(len(d["text"]) for d in docs)
        print(f"{name}: {len(docs)} documents, {chars} characters")


if __name__ == "__main__":
    main()
