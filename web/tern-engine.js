// TernEngine: the JavaScript API of tern's WebAssembly build (tern.js + tern.wasm, made by
// scripts/build-web.sh). A classic script: a Web Worker loads it with importScripts() after tern.js,
// Node with require(). One engine per instance. generate() runs `tern run`'s loop (greedy and
// sampled decoding on the device where the backend can) and hands each token to a callback as it
// comes; under JSPI the callback may return a promise, and the engine waits for it, so the caller can
// yield to its event loop between tokens and stop at any token.
//
//   const engine = await TernEngine.create();                         // a worker: after importScripts("tern.js")
//   const info = await engine.loadModel(bytes, "tern-32m-en.gguf");   // {name, arch, n_layer, n_vocab, backend, ...}
//   const stats = await engine.generate("The ship", { temp: 0, nPredict: 32 }, (t) => { out += t.text; });
(function (root) {
  "use strict";

  // The exports that may reach a WebGPU wait or the token callback (they return promises under JSPI),
  // and the imports that may suspend them.
  const SUSPENDING_EXPORTS = ["tern_web_load", "tern_web_generate", "tern_web_unload"];
  const SUSPENDING_IMPORTS = ["tern_wgpuInstanceProcessEvents", "tern_web_token"];

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
    // options.wasmBinary: tern.wasm's bytes (Node); options.locateFile: where tern.wasm is (a page);
    // options.env: environment variables the engine sees (getenv), e.g. { TERN_WEBGPU_TUNE: "..." }.
    // Where the JavaScript engine has JSPI (WebAssembly.Suspending: Chromium), the WebGPU backend's
    // waits suspend the WebAssembly stack (web/webgpu-library.js) and the engine's calls that may
    // wait return promises; `await` every call that way. Without JSPI only the CPU backend runs.
    static async create(options = {}) {
      const factory = options.createModule || root.createTernModule;
      if (typeof factory !== "function") throw new Error("tern.js is not loaded (createTernModule is missing)");
      const args = { print: options.print || (() => {}), printErr: options.printErr || ((s) => console.warn(s)) };
      if (options.wasmBinary) args.wasmBinary = options.wasmBinary;
      if (options.locateFile) args.locateFile = options.locateFile;
      if (options.env) args.preRun = [(m) => Object.assign(m.ENV, options.env)];
      const jspi = typeof WebAssembly.Suspending === "function" && typeof WebAssembly.promising === "function" &&
                   options.jspi !== false;
      if (jspi) {
        args.ternJspi = true;
        args.instantiateWasm = (imports, receive) => {
          for (const name of SUSPENDING_IMPORTS) imports.env[name] = new WebAssembly.Suspending(imports.env[name]);
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
        stats: m.cwrap("tern_web_stats", "string", []),
        checkFits: m.cwrap("tern_web_check_fits", "number", ["number", "string"]),
        tokenize: m.cwrap("tern_web_tokenize", "string", ["string"]),
      };
      this.info = null;
      this.loads = 0;         // model folders made so far (each load gets a new one)
      this.modelDir = null;   // the loaded model's folder
      this.mounts = new Set();  // the model folders that are mounts
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

    // Loads a GGUF model. source: its bytes (a Uint8Array or ArrayBuffer: the engine's in-memory
    // file system takes them, outside the WebAssembly heap), a Blob or File (in a worker: read where
    // it lies, Emscripten's WORKERFS), or {path} (Node: a host file, NODEFS). options.backend "cpu"
    // (default: the whole file in the heap, so it must fit there) or "webgpu" (navigator.gpu, needs
    // JSPI; the file is read a layer at a time into GPU buffers, so it may be larger than the heap);
    // allowCpuAdapter: accept a software WebGPU adapter (SwiftShader), correct but slow (tests);
    // onProgress(bytesRead, totalBytes): the weights read so far (WebGPU).
    async loadModel(source, name = "model.gguf", options = {}) {
      const backend = options.backend || "cpu";
      if (backend === "webgpu" && !this.jspi) {
        throw new Error("the WebGPU backend needs JSPI (WebAssembly.Suspending), which this JavaScript engine lacks");
      }
      const FS = this.module.FS;
      const safe = String(name).replace(/[^A-Za-z0-9._-]/g, "_") || "model.gguf";
      let isBlob = typeof Blob !== "undefined" && source instanceof Blob;
      if (isBlob && backend === "cpu") {  // (WORKERFS cannot be mapped): read it, if it can fit at all
        if (this.api.checkFits(source.size, backend) < 0) {
          throw new Error(`cannot load model '${safe}': ${this.api.error()}`);
        }
        source = await source.arrayBuffer();
        isBlob = false;
      }
      const dir = "/models" + ++this.loads;
      FS.mkdir(dir);
      let path = dir + "/" + safe;
      if (isBlob) {
        FS.mount(FS.filesystems.WORKERFS, { blobs: [{ name: safe, data: source }] }, dir);
        this.mounts.add(dir);
      } else if (source && typeof source === "object" && typeof source.path === "string") {
        const cut = source.path.lastIndexOf("/");
        FS.mount(FS.filesystems.NODEFS, { root: cut > 0 ? source.path.slice(0, cut) : cut === 0 ? "/" : "." }, dir);
        this.mounts.add(dir);
        path = dir + "/" + source.path.slice(cut + 1);
      } else {
        const bytes = source instanceof Uint8Array ? source : new Uint8Array(source);
        FS.writeFile(path, bytes, { canOwn: true });
      }
      this.module.ternOnProgress = options.onProgress || null;
      try {
        if ((await this.callAsync("tern_web_load", path, backend, options.allowCpuAdapter ? 1 : 0)) < 0) this.fail();
      } catch (e) {
        this.forget(dir);
        if (this.modelDir) this.forget(this.modelDir);  // (the engine dropped the old model first)
        this.modelDir = null;
        this.info = null;
        throw e;
      } finally {
        this.module.ternOnProgress = null;
      }
      // The CPU backend copied the file into the heap; WebGPU keeps the file open (its metadata) until
      // the next load, which removes it.
      if (this.modelDir) this.forget(this.modelDir);
      this.modelDir = null;
      if (backend === "cpu") this.forget(dir);
      else this.modelDir = dir;
      this.info = JSON.parse(this.api.modelInfo());
      return this.info;
    }

    // Drops the loaded model and its backend: GPU buffers and the WebGPU device are destroyed once the
    // work queued on them has run (dawn.node under Node must not reach its teardown with a live device:
    // it crashes there). The engine can load another model afterwards.
    async unload() {
      if ((await this.callAsync("tern_web_unload")) < 0) this.fail();
      if (this.modelDir) this.forget(this.modelDir);
      this.modelDir = null;
      this.info = null;
    }

    // Removes a model's folder from the engine's file system: unmounts a mount (the host's or the
    // Blob's files are never touched), deletes an in-memory copy.
    forget(dir) {
      const FS = this.module.FS;
      if (this.mounts.delete(dir)) {
        FS.unmount(dir);
      } else {
        for (const f of FS.readdir(dir)) if (f !== "." && f !== "..") FS.unlink(dir + "/" + f);
      }
      FS.rmdir(dir);
    }

    // Generates for `prompt` with the sampler settings (see DEFAULTS) as `tern run` does, calling
    // onToken({id, text}) with each token as it comes (text: what became complete with it, possibly
    // empty inside a UTF-8 sequence; a last call with id -1 carries text still pending at the end).
    // onToken returns false to stop; under JSPI it may return a promise of that (the engine waits),
    // without JSPI it must answer at once. Returns {nPrompt, nGenerated, promptMs, generateMs,
    // decodeMs (tokens 2..n), hostMs (of generateMs, recording and submitting decode steps: near
    // decodeMs, the host is the bottleneck), stoppedByEog, stopped, decoding (how ids were chosen: "greedy on the
    // device", "sampled on the device", "sampled on the host from each step's logits", "on the CPU")}.
    async generate(prompt, settings = {}, onToken = () => true) {
      const s = { ...DEFAULTS, ...settings };
      s.chat = s.chat ? 1 : 0;
      for (const [k, v] of Object.entries(s)) {
        if (typeof v !== "number" || Number.isNaN(v)) throw new Error(`setting ${k} must be a number (got ${v})`);
      }
      this.api.setParams(s.temp, s.topK, s.topP, s.minP, s.repeatPenalty, s.repeatLastN, s.seed, s.nPredict, s.nCtx, s.chat);
      let failure = null;  // an exception of onToken, rethrown after the engine has stopped
      const answer = (go) => (go === false ? 0 : 1);
      this.module.ternOnToken = (id, text) => {
        if (failure) return 0;
        try {
          const r = onToken({ id, text });
          if (r && typeof r.then === "function") {
            if (!this.jspi) throw new Error("onToken returned a promise, which the engine can wait for only under JSPI");
            return r.then(answer, (e) => { failure = e; return 0; });
          }
          return answer(r);
        } catch (e) {
          failure = e;
          return 0;
        }
      };
      let n;
      try {
        n = await this.callAsync("tern_web_generate", String(prompt));
      } finally {
        this.module.ternOnToken = null;
      }
      if (failure) throw failure;
      if (n < 0) this.fail();
      const j = JSON.parse(this.api.stats());
      return { nPrompt: j.n_prompt, nGenerated: j.n_generated, promptMs: j.prompt_ms, generateMs: j.generate_ms,
               decodeMs: j.decode_ms, hostMs: j.host_ms, stoppedByEog: j.stopped_by_eog, stopped: j.stopped, decoding: j.decoding };
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
