// TernEngine: the JavaScript API of tern's WebAssembly build (tern.js + tern.wasm, made by
// scripts/build-web.sh). A classic script: a Web Worker loads it with importScripts() after tern.js,
// Node with require(). One engine per instance; every call is short (next() is one token), so the
// caller yields to its event loop between calls and can stop at any token.
//
//   const engine = await TernEngine.create();                         // a worker: after importScripts("tern.js")
//   const info = await engine.loadModel(bytes, "tern-32m-en.gguf");   // {name, arch, n_layer, n_vocab, backend, ...}
//   await engine.start("The ship", { temp: 0, nPredict: 32 });        // returns the prompt's token count
//   for (let t; !(t = await engine.next()).done; ) out += t.text;     // then out += t.text once more
(function (root) {
  "use strict";

  // The exports that may reach a WebGPU wait (they return promises under JSPI).
  const SUSPENDING_EXPORTS = ["tern_web_load", "tern_web_start", "tern_web_next"];

  // The sampler settings and their defaults: `tern run`'s (llama.cpp's).
  const DEFAULTS = Object.freeze({
    temp: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1.0, repeatLastN: 64,
    seed: -1,        // < 0: a random seed
    nPredict: 128,   // < 0: until end of text or a full context
    nCtx: 0,         // <= 0: the model's training context
    chat: false,     // true: the prompt is a user message in the model's chat format (info.chat_template)
  });

  class TernEngine {
    // options.createModule: the factory tern.js defines (default: the global createTernModule);
    // options.wasmBinary: tern.wasm's bytes (Node); options.locateFile: where tern.wasm is (a page).
    // Where the JavaScript engine has JSPI (WebAssembly.Suspending: Chromium), the WebGPU backend's
    // waits suspend the WebAssembly stack (web/webgpu-library.js) and the engine's calls that may
    // wait return promises; `await` every call that way. Without JSPI only the CPU backend runs.
    static async create(options = {}) {
      const factory = options.createModule || root.createTernModule;
      if (typeof factory !== "function") throw new Error("tern.js is not loaded (createTernModule is missing)");
      const args = { print: options.print || (() => {}), printErr: options.printErr || ((s) => console.warn(s)) };
      if (options.wasmBinary) args.wasmBinary = options.wasmBinary;
      if (options.locateFile) args.locateFile = options.locateFile;
      const jspi = typeof WebAssembly.Suspending === "function" && typeof WebAssembly.promising === "function" &&
                   options.jspi !== false;
      if (jspi) {
        args.ternJspi = true;
        args.instantiateWasm = (imports, receive) => {
          imports.env.tern_wgpuInstanceProcessEvents = new WebAssembly.Suspending(imports.env.tern_wgpuInstanceProcessEvents);
          const done = ({ instance, module }) => {
            const exports = Object.assign({}, instance.exports);
            for (const name of SUSPENDING_EXPORTS) exports[name] = WebAssembly.promising(instance.exports[name]);
            receive({ exports }, module);
          };
          const url = options.locateFile ? options.locateFile("tern.wasm", "") : "tern.wasm";
          const instantiating = options.wasmBinary ? WebAssembly.instantiate(options.wasmBinary, imports)
            : WebAssembly.instantiateStreaming(fetch(url), imports);
          instantiating.then(done, (e) => args.printErr("cannot instantiate tern.wasm: " + e));
          return {};
        };
      }
      const engine = new TernEngine(await factory(args));
      engine.jspi = jspi;
      return engine;
    }

    constructor(module) {
      const m = module;
      this.module = m;
      this.api = {
        error: m.cwrap("tern_web_error", "string", []),
        modelInfo: m.cwrap("tern_web_model_info", "string", []),
        setParams: m.cwrap("tern_web_set_params", null,
                           ["number", "number", "number", "number", "number", "number", "number", "number", "number", "number"]),
        text: m.cwrap("tern_web_text", "string", []),
        stoppedByEog: m.cwrap("tern_web_stopped_by_eog", "number", []),
        tokenize: m.cwrap("tern_web_tokenize", "string", ["string"]),
      };
      this.info = null;
    }

    fail() {
      throw new Error(this.api.error());
    }

    // Calls an export that may suspend with a UTF-8 copy of each string argument (malloc'd, not on
    // the stack: a suspended call keeps using them).
    async callAsync(name, ...args) {
      const m = this.module, owned = [];
      const conv = args.map((a) => {
        if (typeof a !== "string") return a;
        const n = m.lengthBytesUTF8(a) + 1, p = m._malloc(n);
        m.stringToUTF8(a, p, n);
        owned.push(p);
        return p;
      });
      try {
        return await m["_" + name](...conv);
      } finally {
        owned.forEach((p) => m._free(p));
      }
    }

    // Loads a GGUF model from its bytes (a Uint8Array; the engine keeps its own copy) on a backend:
    // options.backend "cpu" (default) or "webgpu" (navigator.gpu, needs JSPI); allowCpuAdapter: accept
    // a software WebGPU adapter (SwiftShader), which is correct but slow (tests).
    async loadModel(bytes, name = "model.gguf", options = {}) {
      if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
      const backend = options.backend || "cpu";
      if (backend === "webgpu" && !this.jspi) {
        throw new Error("the WebGPU backend needs JSPI (WebAssembly.Suspending), which this JavaScript engine lacks");
      }
      const safe = String(name).replace(/[^A-Za-z0-9._-]/g, "_") || "model.gguf";
      const FS = this.module.FS;
      try { FS.mkdir("/models"); } catch (e) { /* exists */ }
      const path = "/models/" + safe;
      FS.writeFile(path, bytes, { canOwn: true });
      try {
        if ((await this.callAsync("tern_web_load", path, backend, options.allowCpuAdapter ? 1 : 0)) < 0) this.fail();
      } finally {
        FS.unlink(path);  // the engine mapped (copied) what it needs
      }
      this.info = JSON.parse(this.api.modelInfo());
      return this.info;
    }

    // Reads the prompt with the given sampler settings (see DEFAULTS); returns its token count.
    async start(prompt, settings = {}) {
      const s = { ...DEFAULTS, ...settings };
      s.chat = s.chat ? 1 : 0;
      for (const [k, v] of Object.entries(s)) {
        if (typeof v !== "number" || Number.isNaN(v)) throw new Error(`setting ${k} must be a number (got ${v})`);
      }
      this.api.setParams(s.temp, s.topK, s.topP, s.minP, s.repeatPenalty, s.repeatLastN, s.seed, s.nPredict, s.nCtx, s.chat);
      const n = await this.callAsync("tern_web_start", String(prompt));
      if (n < 0) this.fail();
      return n;
    }

    // The next token {id, text, done: false}, or {done: true, text, stoppedByEog} at the end
    // (text: whatever was still pending, e.g. an incomplete UTF-8 sequence).
    async next() {
      const id = await this.module._tern_web_next();
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
