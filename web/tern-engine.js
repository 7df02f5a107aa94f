// TernEngine: the JavaScript API of tern's WebAssembly build (tern.js + tern.wasm, made by
// scripts/build-web.sh). A classic script: a Web Worker loads it with importScripts() after tern.js,
// Node with require(). One engine per instance; every call is synchronous and short (next() is one
// token), so the caller yields to its event loop between calls and can stop at any token.
//
//   const engine = await TernEngine.create();                   // a worker: after importScripts("tern.js")
//   const info   = engine.loadModel(bytes, "tern-32m-en.gguf"); // {name, arch, n_layer, n_vocab, ...}
//   engine.start("The ship", { temp: 0, nPredict: 32 });        // returns the prompt's token count
//   for (let t; !(t = engine.next()).done; ) out += t.text;     // then out += t.text once more
(function (root) {
  "use strict";

  // The sampler settings and their defaults: `tern run`'s (llama.cpp's).
  const DEFAULTS = Object.freeze({
    temp: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1.0, repeatLastN: 64,
    seed: -1,        // < 0: a random seed
    nPredict: 128,   // < 0: until end of text or a full context
    nCtx: 0,         // <= 0: the model's training context
  });

  class TernEngine {
    // options.createModule: the factory tern.js defines (default: the global createTernModule);
    // options.wasmBinary: tern.wasm's bytes (Node); options.locateFile: where tern.wasm is (a page).
    static async create(options = {}) {
      const factory = options.createModule || root.createTernModule;
      if (typeof factory !== "function") throw new Error("tern.js is not loaded (createTernModule is missing)");
      const args = { print: options.print || (() => {}), printErr: options.printErr || ((s) => console.warn(s)) };
      if (options.wasmBinary) args.wasmBinary = options.wasmBinary;
      if (options.locateFile) args.locateFile = options.locateFile;
      return new TernEngine(await factory(args));
    }

    constructor(module) {
      const m = module;
      this.module = m;
      this.api = {
        error: m.cwrap("tern_web_error", "string", []),
        load: m.cwrap("tern_web_load", "number", ["string"]),
        modelInfo: m.cwrap("tern_web_model_info", "string", []),
        setParams: m.cwrap("tern_web_set_params", null,
                           ["number", "number", "number", "number", "number", "number", "number", "number", "number"]),
        start: m.cwrap("tern_web_start", "number", ["string"]),
        next: m.cwrap("tern_web_next", "number", []),
        text: m.cwrap("tern_web_text", "string", []),
        stoppedByEog: m.cwrap("tern_web_stopped_by_eog", "number", []),
        tokenize: m.cwrap("tern_web_tokenize", "string", ["string"]),
      };
      this.info = null;
    }

    fail() {
      throw new Error(this.api.error());
    }

    // Loads a GGUF model from its bytes (a Uint8Array; the engine keeps its own copy).
    loadModel(bytes, name = "model.gguf") {
      if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
      const safe = String(name).replace(/[^A-Za-z0-9._-]/g, "_") || "model.gguf";
      const FS = this.module.FS;
      try { FS.mkdir("/models"); } catch (e) { /* exists */ }
      const path = "/models/" + safe;
      FS.writeFile(path, bytes, { canOwn: true });
      try {
        if (this.api.load(path) < 0) this.fail();
      } finally {
        FS.unlink(path);  // the engine mapped (copied) what it needs
      }
      this.info = JSON.parse(this.api.modelInfo());
      return this.info;
    }

    // Reads the prompt with the given sampler settings (see DEFAULTS); returns its token count.
    start(prompt, settings = {}) {
      const s = { ...DEFAULTS, ...settings };
      for (const [k, v] of Object.entries(s)) {
        if (typeof v !== "number" || Number.isNaN(v)) throw new Error(`setting ${k} must be a number (got ${v})`);
      }
      this.api.setParams(s.temp, s.topK, s.topP, s.minP, s.repeatPenalty, s.repeatLastN, s.seed, s.nPredict, s.nCtx);
      const n = this.api.start(String(prompt));
      if (n < 0) this.fail();
      return n;
    }

    // The next token {id, text, done: false}, or {done: true, text, stoppedByEog} at the end
    // (text: whatever was still pending, e.g. an incomplete UTF-8 sequence).
    next() {
      const id = this.api.next();
      if (id === -1) this.fail();
      const text = this.api.text();
      if (id === -2) return { done: true, text, stoppedByEog: this.api.stoppedByEog() === 1 };
      return { id, text, done: false };
    }

    // Token ids of `text` (BOS added, special-token text parsed), as `tern tokenize --bos --parse-special`.
    tokenize(text) {
      const json = this.api.tokenize(String(text));
      if (json === null || json === "") this.fail();
      return JSON.parse(json);
    }
  }
  TernEngine.DEFAULTS = DEFAULTS;

  if (typeof module === "object" && module.exports) module.exports = { TernEngine };
  else root.TernEngine = TernEngine;
})(typeof self !== "undefined" ? self : globalThis);
