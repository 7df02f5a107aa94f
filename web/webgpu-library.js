// tern's webgpu.h on navigator.gpu: the subset that src/backend/webgpu/webgpu_api.h declares, as an
// Emscripten JS library (linked into tern.wasm's imports by apps/web/CMakeLists.txt), each function
// named tern_wgpu... (src/backend/webgpu/wgpu_loader_web.cpp says why); a compute pass's
// setPipeline / setBindGroup / dispatchWorkgroups arrive as one command list per pass
// (tern_wgpuComputePassEncoderReplay). Handles are
// small integers into one table. Struct offsets come from the C++ side (tern_wgpu_layout() in
// wgpu_loader_web.cpp), so they are the compiler's, not hand-counted.
//
// Asynchronous operations (adapter, device, mapping, error scopes, compilation info, queue done)
// queue their C callbacks when the browser's promise settles; tern_wgpuInstanceProcessEvents runs the
// queued callbacks, or, with none queued, returns a promise that settles when one is queued. Under
// JSPI (web/tern-engine.js wraps this import in WebAssembly.Suspending and the engine's exports in
// WebAssembly.promising) that promise suspends the WebAssembly stack, so tern's waits yield to the
// browser instead of blocking it. Without JSPI the WebGPU backend is refused at start.
mergeInto(LibraryManager.library, {
  $TernWGPU__deps: ["malloc", "free"],
  $TernWGPU: {
    objs: [null],
    freeIds: [],
    oneOffset: [0],  // the replay's one dynamic offset (setBindGroup copies it)
    pending: [],     // callbacks waiting for wgpuInstanceProcessEvents
    L: null,         // struct offsets
    nextFuture: 1,
    add: function (o) {
      const id = TernWGPU.freeIds.length ? TernWGPU.freeIds.pop() : TernWGPU.objs.length;
      TernWGPU.objs[id] = o;
      return id;
    },
    get: function (id) { return id ? TernWGPU.objs[id] : undefined; },
    release: function (id) {
      if (id && TernWGPU.objs[id] !== undefined) { TernWGPU.objs[id] = undefined; TernWGPU.freeIds.push(id); }
    },
    layout: function () {
      if (!TernWGPU.L) {
        const L = {};
        for (const kv of UTF8ToString(Module["_tern_wgpu_layout"]()).split(",")) {
          if (!kv) continue;
          const [k, v] = kv.split("=");
          L[k.replace(/^WGPU/, "")] = Number(v);
        }
        TernWGPU.L = L;
      }
      return TernWGPU.L;
    },
    u32: function (p) { return HEAPU32[p >> 2]; },
    u64: function (p) { return HEAPU32[p >> 2] + HEAPU32[(p + 4) >> 2] * 4294967296; },
    setU32: function (p, v) { HEAPU32[p >> 2] = v >>> 0; },
    setU64: function (p, v) { HEAPU32[p >> 2] = v % 4294967296; HEAPU32[(p + 4) >> 2] = Math.floor(v / 4294967296); },
    f64: function (p) { return HEAPF64[p >> 3]; },
    // A WGPUStringView at p: {data, length}; length 0xFFFFFFFF = null-terminated.
    str: function (p) {
      const data = HEAPU32[p >> 2], len = HEAPU32[(p + 4) >> 2];
      if (!data) return "";
      return len === 0xFFFFFFFF ? UTF8ToString(data) : UTF8ToString(data, len);
    },
    label: function (p) { const s = TernWGPU.str(p); return s ? s : undefined; },
    // A malloc'd UTF-8 copy of s and its length, for a WGPUStringView the C side reads.
    cstr: function (s) {
      const n = lengthBytesUTF8(s);
      const p = _malloc(n + 1);
      stringToUTF8(s, p, n + 1);
      return [p, n];
    },
    // Calls a C callback with a WGPUStringView message (passed by pointer: wasm32 passes a
    // two-field struct indirectly); args before and after the message.
    callWithMessage: function (fn, before, message, after) {
      const sv = _malloc(8);
      const [p, n] = TernWGPU.cstr(message || "");
      HEAPU32[sv >> 2] = p;
      HEAPU32[(sv + 4) >> 2] = n;
      try {
        wasmTable.get(fn).apply(null, before.concat([sv], after));
      } finally {
        _free(p);
        _free(sv);
      }
    },
    // Reads a callback info {nextInChain, mode, callback, userdata1, userdata2} at p.
    info: function (p) {
      const L = TernWGPU.layout();
      return { fn: TernWGPU.u32(p + L["CallbackInfo.callback"]), u1: TernWGPU.u32(p + L["CallbackInfo.userdata1"]),
               u2: TernWGPU.u32(p + L["CallbackInfo.userdata2"]) };
    },
    later: function (run) { TernWGPU.pending.push(run); TernWGPU.wake(); },
    future: function () { return BigInt(TernWGPU.nextFuture++); },
    limitNames: ["maxTextureDimension1D", "maxTextureDimension2D", "maxTextureDimension3D", "maxTextureArrayLayers",
      "maxBindGroups", "maxBindGroupsPlusVertexBuffers", "maxBindingsPerBindGroup",
      "maxDynamicUniformBuffersPerPipelineLayout", "maxDynamicStorageBuffersPerPipelineLayout",
      "maxSampledTexturesPerShaderStage", "maxSamplersPerShaderStage", "maxStorageBuffersPerShaderStage",
      "maxStorageTexturesPerShaderStage", "maxUniformBuffersPerShaderStage", "maxUniformBufferBindingSize",
      "maxStorageBufferBindingSize", "minUniformBufferOffsetAlignment", "minStorageBufferOffsetAlignment",
      "maxVertexBuffers", "maxBufferSize", "maxVertexAttributes", "maxVertexBufferArrayStride",
      "maxInterStageShaderVariables", "maxColorAttachments", "maxColorAttachmentBytesPerSample",
      "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX",
      "maxComputeWorkgroupSizeY", "maxComputeWorkgroupSizeZ", "maxComputeWorkgroupsPerDimension"],
    wideLimits: { maxUniformBufferBindingSize: 1, maxStorageBufferBindingSize: 1, maxBufferSize: 1 },
    writeLimits: function (p, limits) {
      const L = TernWGPU.layout();
      for (const name of TernWGPU.limitNames) {
        const at = L["Limits." + name];
        const v = limits[name];
        if (at === undefined || v === undefined) continue;
        if (TernWGPU.wideLimits[name]) TernWGPU.setU64(p + at, v); else TernWGPU.setU32(p + at, v);
      }
    },
    readLimits: function (p) {
      const L = TernWGPU.layout(), out = {};
      for (const name of TernWGPU.limitNames) {
        const at = L["Limits." + name];
        if (at === undefined) continue;
        const v = TernWGPU.wideLimits[name] ? TernWGPU.u64(p + at) : TernWGPU.u32(p + at);
        if (v !== 0xFFFFFFFF && v < 2 ** 53 - 1) out[name] = v;  // UNDEFINED sentinels left out
      }
      return out;
    },
    // v1.0 feature ids <-> names (the ones tern asks for).
    featureIds: { "timestamp-query": 0x09, "shader-f16": 0x0B, "subgroups": 0x12 },
    errorType: function (e) {
      if (!e) return 1;                                       // no error
      if (typeof GPUValidationError !== "undefined" && e instanceof GPUValidationError) return 2;
      if (typeof GPUOutOfMemoryError !== "undefined" && e instanceof GPUOutOfMemoryError) return 3;
      if (typeof GPUInternalError !== "undefined" && e instanceof GPUInternalError) return 4;
      return 5;
    },
    // Where a device's handle lives in memory (device-lost and error callbacks take a pointer to it).
    handleCell: function (id) { const p = _malloc(4); HEAPU32[p >> 2] = id; return p; },
    // A promise that settles when the next callback is queued (later()), or after fallbackMs in any case
    // (the C++ wait then checks its deadline). The event loop runs freely meanwhile, so the browser
    // (or dawn.node, which settles its promises from Node's event loop) finishes the operation, and the
    // wait resumes as soon as it did: no polling, no busy loop.
    fallbackMs: 10,
    waker: null,
    nextEvent: function () {
      return new Promise(function (resolve) {
        const timer = setTimeout(function () { TernWGPU.wake(); }, TernWGPU.fallbackMs);
        TernWGPU.waker = function () { clearTimeout(timer); resolve(); };
      });
    },
    wake: function () {
      const w = TernWGPU.waker;
      TernWGPU.waker = null;
      if (w) w();
    },
  },

  tern_wgpuCreateInstance__deps: ["$TernWGPU"],
  tern_wgpuCreateInstance: function (desc) {
    if (typeof navigator === "undefined" || !navigator.gpu) return 0;
    return TernWGPU.add({ kind: "instance" });
  },
  tern_wgpuInstanceRequestAdapter__deps: ["$TernWGPU"],
  tern_wgpuInstanceRequestAdapter: function (instance, options, cbInfo) {
    const cb = TernWGPU.info(cbInfo);
    const done = function (status, id, message) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [status, id], message, [cb.u1, cb.u2]); });
    };
    if (!Module["ternJspi"]) {
      done(4, 0, "WebGPU from WebAssembly needs JSPI (WebAssembly.Suspending), which this browser lacks");
    } else {
      navigator.gpu.requestAdapter({ powerPreference: "high-performance" }).then(function (a) {
        if (!a) done(3, 0, "navigator.gpu.requestAdapter() found no adapter");
        else done(1, TernWGPU.add(a), "");
      }, function (e) { done(4, 0, String(e)); });
    }
    return TernWGPU.future();
  },
  // The import that suspends (see the top of this file).
  tern_wgpuInstanceProcessEvents__deps: ["$TernWGPU"],
  tern_wgpuInstanceProcessEvents: function (instance) {
    if (TernWGPU.pending.length) {
      const run = TernWGPU.pending.splice(0);
      for (const f of run) f();
      return;
    }
    return TernWGPU.nextEvent();
  },
  tern_wgpuInstanceGetWGSLLanguageFeatures__deps: ["$TernWGPU"],
  tern_wgpuInstanceGetWGSLLanguageFeatures: function (instance, out) {
    const L = TernWGPU.layout();
    const names = { "readonly_and_readwrite_storage_textures": 1, "packed_4x8_integer_dot_product": 2,
                    "unrestricted_pointer_parameters": 3, "pointer_composite_access": 4 };
    const ids = [];
    for (const f of navigator.gpu.wgslLanguageFeatures || []) if (names[f]) ids.push(names[f]);
    const arr = _malloc(4 * Math.max(1, ids.length));
    ids.forEach(function (v, i) { HEAPU32[(arr >> 2) + i] = v; });
    TernWGPU.setU32(out + L["SupportedWGSLLanguageFeatures.featureCount"], ids.length);
    TernWGPU.setU32(out + L["SupportedWGSLLanguageFeatures.features"], arr);
  },
  tern_wgpuInstanceRelease__deps: ["$TernWGPU"],
  tern_wgpuInstanceRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuSupportedWGSLLanguageFeaturesFreeMembers__deps: ["$TernWGPU"],
  tern_wgpuSupportedWGSLLanguageFeaturesFreeMembers: function (p) {
    _free(TernWGPU.u32(p + TernWGPU.layout()["SupportedWGSLLanguageFeatures.features"]));
  },

  tern_wgpuAdapterGetInfo__deps: ["$TernWGPU"],
  tern_wgpuAdapterGetInfo: function (id, out) {
    const a = TernWGPU.get(id), L = TernWGPU.layout();
    const info = a.info || {};
    const put = function (field, s) {
      const [p, n] = TernWGPU.cstr(s || "");
      TernWGPU.setU32(out + L["AdapterInfo." + field], p);
      TernWGPU.setU32(out + L["AdapterInfo." + field] + 4, n);
    };
    put("vendor", info.vendor);
    put("architecture", info.architecture);
    put("device", info.device || [info.vendor, info.architecture].filter(Boolean).join(" "));
    put("description", info.description);
    TernWGPU.setU32(out + L["AdapterInfo.backendType"], 2);  // WebGPU
    // A software rasterizer is a CPU adapter (the backend refuses it unless asked, as natively).
    const cpu = info.isFallbackAdapter || info.architecture === "swiftshader";
    TernWGPU.setU32(out + L["AdapterInfo.adapterType"], cpu ? 3 : 4);
    TernWGPU.setU32(out + L["AdapterInfo.vendorID"], 0);
    TernWGPU.setU32(out + L["AdapterInfo.deviceID"], 0);
    TernWGPU.setU32(out + L["AdapterInfo.subgroupMinSize"], info.subgroupMinSize || 0);
    TernWGPU.setU32(out + L["AdapterInfo.subgroupMaxSize"], info.subgroupMaxSize || 0);
    return 1;
  },
  tern_wgpuAdapterInfoFreeMembers__deps: ["$TernWGPU"],
  tern_wgpuAdapterInfoFreeMembers: function (p) {
    const L = TernWGPU.layout();
    for (const f of ["vendor", "architecture", "device", "description"]) _free(TernWGPU.u32(p + L["AdapterInfo." + f]));
  },
  tern_wgpuAdapterGetLimits__deps: ["$TernWGPU"],
  tern_wgpuAdapterGetLimits: function (id, out) { TernWGPU.writeLimits(out, TernWGPU.get(id).limits); return 1; },
  tern_wgpuAdapterGetFeatures__deps: ["$TernWGPU"],
  tern_wgpuAdapterGetFeatures: function (id, out) {
    const L = TernWGPU.layout(), ids = [];
    for (const f of TernWGPU.get(id).features) if (TernWGPU.featureIds[f]) ids.push(TernWGPU.featureIds[f]);
    const arr = _malloc(4 * Math.max(1, ids.length));
    ids.forEach(function (v, i) { HEAPU32[(arr >> 2) + i] = v; });
    TernWGPU.setU32(out + L["SupportedFeatures.featureCount"], ids.length);
    TernWGPU.setU32(out + L["SupportedFeatures.features"], arr);
  },
  tern_wgpuSupportedFeaturesFreeMembers__deps: ["$TernWGPU"],
  tern_wgpuSupportedFeaturesFreeMembers: function (p) { _free(TernWGPU.u32(p + TernWGPU.layout()["SupportedFeatures.features"])); },
  tern_wgpuAdapterRequestDevice__deps: ["$TernWGPU"],
  tern_wgpuAdapterRequestDevice: function (id, desc, cbInfo) {
    const a = TernWGPU.get(id), L = TernWGPU.layout(), cb = TernWGPU.info(cbInfo);
    const names = {};
    for (const k in TernWGPU.featureIds) names[TernWGPU.featureIds[k]] = k;
    const requiredFeatures = [];
    const n = TernWGPU.u32(desc + L["DeviceDescriptor.requiredFeatureCount"]);
    const fp = TernWGPU.u32(desc + L["DeviceDescriptor.requiredFeatures"]);
    for (let i = 0; i < n; ++i) { const name = names[HEAPU32[(fp >> 2) + i]]; if (name) requiredFeatures.push(name); }
    const lp = TernWGPU.u32(desc + L["DeviceDescriptor.requiredLimits"]);
    const requiredLimits = {};
    if (lp) {
      const wanted = TernWGPU.readLimits(lp);
      for (const k in wanted) if (k in a.limits) requiredLimits[k] = wanted[k];
    }
    const lost = TernWGPU.info(desc + L["DeviceDescriptor.deviceLostCallbackInfo"]);
    const ue = desc + L["DeviceDescriptor.uncapturedErrorCallbackInfo"];
    const onError = { fn: TernWGPU.u32(ue + L["UncapturedErrorCallbackInfo.callback"]),
                      u1: TernWGPU.u32(ue + L["UncapturedErrorCallbackInfo.userdata1"]),
                      u2: TernWGPU.u32(ue + L["UncapturedErrorCallbackInfo.userdata2"]) };
    a.requestDevice({ requiredFeatures: requiredFeatures, requiredLimits: requiredLimits }).then(function (device) {
      const did = TernWGPU.add(device);
      const cell = TernWGPU.handleCell(did);
      if (lost.fn) {
        device.lost.then(function (info) {
          const reason = info.reason === "destroyed" ? 2 : 1;
          TernWGPU.later(function () { TernWGPU.callWithMessage(lost.fn, [cell, reason], info.message, [lost.u1, lost.u2]); });
        });
      }
      if (onError.fn) {
        device.onuncapturederror = function (ev) {
          const type = TernWGPU.errorType(ev.error);
          TernWGPU.later(function () { TernWGPU.callWithMessage(onError.fn, [cell, type], ev.error.message, [onError.u1, onError.u2]); });
        };
      }
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [1, did], "", [cb.u1, cb.u2]); });
    }, function (e) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [3, 0], String(e), [cb.u1, cb.u2]); });
    });
    return TernWGPU.future();
  },
  tern_wgpuAdapterRelease__deps: ["$TernWGPU"],
  tern_wgpuAdapterRelease: function (id) { TernWGPU.release(id); },

  tern_wgpuDeviceGetLimits__deps: ["$TernWGPU"],
  tern_wgpuDeviceGetLimits: function (id, out) { TernWGPU.writeLimits(out, TernWGPU.get(id).limits); return 1; },
  tern_wgpuDeviceGetQueue__deps: ["$TernWGPU"],
  tern_wgpuDeviceGetQueue: function (id) { return TernWGPU.add(TernWGPU.get(id).queue); },
  tern_wgpuDevicePushErrorScope__deps: ["$TernWGPU"],
  tern_wgpuDevicePushErrorScope: function (id, filter) {
    TernWGPU.get(id).pushErrorScope(filter === 2 ? "out-of-memory" : filter === 3 ? "internal" : "validation");
  },
  tern_wgpuDevicePopErrorScope__deps: ["$TernWGPU"],
  tern_wgpuDevicePopErrorScope: function (id, cbInfo) {
    const cb = TernWGPU.info(cbInfo);
    TernWGPU.get(id).popErrorScope().then(function (e) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [1, TernWGPU.errorType(e)], e ? e.message : "", [cb.u1, cb.u2]); });
    }, function (e) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [3, 5], String(e), [cb.u1, cb.u2]); });
    });
    return TernWGPU.future();
  },
  tern_wgpuDeviceCreateBuffer__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateBuffer: function (id, desc) {
    const L = TernWGPU.layout();
    return TernWGPU.add(TernWGPU.get(id).createBuffer({
      label: TernWGPU.label(desc + L["BufferDescriptor.label"]),
      usage: TernWGPU.u32(desc + L["BufferDescriptor.usage"]),
      size: TernWGPU.u64(desc + L["BufferDescriptor.size"]),
      mappedAtCreation: TernWGPU.u32(desc + L["BufferDescriptor.mappedAtCreation"]) !== 0,
    }));
  },
  tern_wgpuDeviceCreateShaderModule__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateShaderModule: function (id, desc) {
    const L = TernWGPU.layout();
    let code = "";
    for (let c = TernWGPU.u32(desc + L["ShaderModuleDescriptor.nextInChain"]); c; c = TernWGPU.u32(c + L["ChainedStruct.next"])) {
      if (TernWGPU.u32(c + L["ChainedStruct.sType"]) === 2) code = TernWGPU.str(c + L["ShaderSourceWGSL.code"]);
    }
    return TernWGPU.add(TernWGPU.get(id).createShaderModule({ label: TernWGPU.label(desc + L["ShaderModuleDescriptor.label"]), code: code }));
  },
  tern_wgpuShaderModuleGetCompilationInfo__deps: ["$TernWGPU"],
  tern_wgpuShaderModuleGetCompilationInfo: function (id, cbInfo) {
    const cb = TernWGPU.info(cbInfo), L = TernWGPU.layout();
    TernWGPU.get(id).getCompilationInfo().then(function (info) {
      TernWGPU.later(function () {
        const msgs = info.messages, size = L["sizeof.WGPUCompilationMessage"];
        const arr = _malloc(Math.max(1, msgs.length) * size), strings = [];
        HEAPU8.fill(0, arr, arr + Math.max(1, msgs.length) * size);
        msgs.forEach(function (m, i) {
          const p = arr + i * size, [s, n] = TernWGPU.cstr(m.message);
          strings.push(s);
          TernWGPU.setU32(p + L["CompilationMessage.message"], s);
          TernWGPU.setU32(p + L["CompilationMessage.message"] + 4, n);
          TernWGPU.setU32(p + L["CompilationMessage.type"], m.type === "error" ? 1 : m.type === "warning" ? 2 : 3);
          TernWGPU.setU64(p + L["CompilationMessage.lineNum"], m.lineNum);
          TernWGPU.setU64(p + L["CompilationMessage.linePos"], m.linePos);
          TernWGPU.setU64(p + L["CompilationMessage.offset"], m.offset);
          TernWGPU.setU64(p + L["CompilationMessage.length"], m.length);
        });
        const ci = _malloc(L["sizeof.WGPUCompilationInfo"]);
        HEAPU8.fill(0, ci, ci + L["sizeof.WGPUCompilationInfo"]);
        TernWGPU.setU32(ci + L["CompilationInfo.messageCount"], msgs.length);
        TernWGPU.setU32(ci + L["CompilationInfo.messages"], arr);
        try {
          wasmTable.get(cb.fn)(1, ci, cb.u1, cb.u2);
        } finally {
          strings.forEach(function (s) { _free(s); });
          _free(arr);
          _free(ci);
        }
      });
    });
    return TernWGPU.future();
  },
  tern_wgpuDeviceCreateBindGroupLayout__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateBindGroupLayout: function (id, desc) {
    const L = TernWGPU.layout(), size = L["sizeof.WGPUBindGroupLayoutEntry"];
    const n = TernWGPU.u32(desc + L["BindGroupLayoutDescriptor.entryCount"]);
    const base = TernWGPU.u32(desc + L["BindGroupLayoutDescriptor.entries"]);
    const types = { 2: "uniform", 3: "storage", 4: "read-only-storage" };
    const entries = [];
    for (let i = 0; i < n; ++i) {
      const e = base + i * size, b = e + L["BindGroupLayoutEntry.buffer"];
      entries.push({
        binding: TernWGPU.u32(e + L["BindGroupLayoutEntry.binding"]),
        visibility: TernWGPU.u32(e + L["BindGroupLayoutEntry.visibility"]),
        buffer: { type: types[TernWGPU.u32(b + L["BufferBindingLayout.type"])],
                  hasDynamicOffset: TernWGPU.u32(b + L["BufferBindingLayout.hasDynamicOffset"]) !== 0,
                  minBindingSize: TernWGPU.u64(b + L["BufferBindingLayout.minBindingSize"]) },
      });
    }
    return TernWGPU.add(TernWGPU.get(id).createBindGroupLayout({ label: TernWGPU.label(desc + L["BindGroupLayoutDescriptor.label"]), entries: entries }));
  },
  tern_wgpuDeviceCreatePipelineLayout__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreatePipelineLayout: function (id, desc) {
    const L = TernWGPU.layout();
    const n = TernWGPU.u32(desc + L["PipelineLayoutDescriptor.bindGroupLayoutCount"]);
    const p = TernWGPU.u32(desc + L["PipelineLayoutDescriptor.bindGroupLayouts"]);
    const layouts = [];
    for (let i = 0; i < n; ++i) layouts.push(TernWGPU.get(HEAPU32[(p >> 2) + i]));
    return TernWGPU.add(TernWGPU.get(id).createPipelineLayout({ label: TernWGPU.label(desc + L["PipelineLayoutDescriptor.label"]), bindGroupLayouts: layouts }));
  },
  tern_wgpuDeviceCreateComputePipeline__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateComputePipeline: function (id, desc) {
    const L = TernWGPU.layout();
    const c = desc + L["ComputePipelineDescriptor.compute"];
    const constants = {};
    const n = TernWGPU.u32(c + L["ComputeState.constantCount"]);
    const base = TernWGPU.u32(c + L["ComputeState.constants"]);
    for (let i = 0; i < n; ++i) {
      const e = base + i * L["sizeof.WGPUConstantEntry"];
      constants[TernWGPU.str(e + L["ConstantEntry.key"])] = TernWGPU.f64(e + L["ConstantEntry.value"]);
    }
    const layout = TernWGPU.u32(desc + L["ComputePipelineDescriptor.layout"]);
    const entry = TernWGPU.str(c + L["ComputeState.entryPoint"]);
    return TernWGPU.add(TernWGPU.get(id).createComputePipeline({
      label: TernWGPU.label(desc + L["ComputePipelineDescriptor.label"]),
      layout: layout ? TernWGPU.get(layout) : "auto",
      compute: { module: TernWGPU.get(TernWGPU.u32(c + L["ComputeState.module"])), entryPoint: entry || undefined, constants: constants },
    }));
  },
  tern_wgpuDeviceCreateBindGroup__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateBindGroup: function (id, desc) {
    const L = TernWGPU.layout(), size = L["sizeof.WGPUBindGroupEntry"];
    const n = TernWGPU.u32(desc + L["BindGroupDescriptor.entryCount"]);
    const base = TernWGPU.u32(desc + L["BindGroupDescriptor.entries"]);
    const entries = [];
    for (let i = 0; i < n; ++i) {
      const e = base + i * size;
      const resource = { buffer: TernWGPU.get(TernWGPU.u32(e + L["BindGroupEntry.buffer"])),
                         offset: TernWGPU.u64(e + L["BindGroupEntry.offset"]) };
      const sizeLo = TernWGPU.u32(e + L["BindGroupEntry.size"]), sizeHi = TernWGPU.u32(e + L["BindGroupEntry.size"] + 4);
      if (!(sizeLo === 0xFFFFFFFF && sizeHi === 0xFFFFFFFF)) resource.size = TernWGPU.u64(e + L["BindGroupEntry.size"]);
      entries.push({ binding: TernWGPU.u32(e + L["BindGroupEntry.binding"]), resource: resource });
    }
    return TernWGPU.add(TernWGPU.get(id).createBindGroup({
      label: TernWGPU.label(desc + L["BindGroupDescriptor.label"]),
      layout: TernWGPU.get(TernWGPU.u32(desc + L["BindGroupDescriptor.layout"])), entries: entries,
    }));
  },
  tern_wgpuDeviceCreateCommandEncoder__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateCommandEncoder: function (id, desc) { return TernWGPU.add(TernWGPU.get(id).createCommandEncoder()); },
  tern_wgpuDeviceCreateQuerySet__deps: ["$TernWGPU"],
  tern_wgpuDeviceCreateQuerySet: function (id, desc) {
    const L = TernWGPU.layout();
    return TernWGPU.add(TernWGPU.get(id).createQuerySet({ type: "timestamp", count: TernWGPU.u32(desc + L["QuerySetDescriptor.count"]) }));
  },
  tern_wgpuDeviceDestroy__deps: ["$TernWGPU"],
  tern_wgpuDeviceDestroy: function (id) { TernWGPU.get(id).destroy(); },
  tern_wgpuDeviceRelease__deps: ["$TernWGPU"],
  tern_wgpuDeviceRelease: function (id) { TernWGPU.release(id); },

  tern_wgpuQueueSubmit__deps: ["$TernWGPU"],
  tern_wgpuQueueSubmit: function (id, n, p) {
    const cmds = [];
    for (let i = 0; i < n; ++i) cmds.push(TernWGPU.get(HEAPU32[(p >> 2) + i]));
    TernWGPU.get(id).submit(cmds);
  },
  tern_wgpuQueueWriteBuffer__deps: ["$TernWGPU"],
  tern_wgpuQueueWriteBuffer: function (id, buffer, offset, data, size) {
    TernWGPU.get(id).writeBuffer(TernWGPU.get(buffer), Number(offset), HEAPU8, data, size);
  },
  tern_wgpuQueueOnSubmittedWorkDone__deps: ["$TernWGPU"],
  tern_wgpuQueueOnSubmittedWorkDone: function (id, cbInfo) {
    const cb = TernWGPU.info(cbInfo);
    TernWGPU.get(id).onSubmittedWorkDone().then(function () {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [1], "", [cb.u1, cb.u2]); });
    }, function (e) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [3], String(e), [cb.u1, cb.u2]); });
    });
    return TernWGPU.future();
  },
  tern_wgpuQueueRelease__deps: ["$TernWGPU"],
  tern_wgpuQueueRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuShaderModuleRelease__deps: ["$TernWGPU"],
  tern_wgpuShaderModuleRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuBindGroupLayoutRelease__deps: ["$TernWGPU"],
  tern_wgpuBindGroupLayoutRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuPipelineLayoutRelease__deps: ["$TernWGPU"],
  tern_wgpuPipelineLayoutRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuComputePipelineRelease__deps: ["$TernWGPU"],
  tern_wgpuComputePipelineRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuBindGroupRelease__deps: ["$TernWGPU"],
  tern_wgpuBindGroupRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuQuerySetRelease__deps: ["$TernWGPU"],
  tern_wgpuQuerySetRelease: function (id) { TernWGPU.release(id); },

  // Mapping: the mapped bytes are copied into the wasm heap (malloc'd) for GetConstMappedRange and
  // freed at Unmap.
  tern_wgpuBufferMapAsync__deps: ["$TernWGPU"],
  tern_wgpuBufferMapAsync: function (id, mode, offset, size, cbInfo) {
    const cb = TernWGPU.info(cbInfo), b = TernWGPU.get(id);
    b.mapAsync(Number(mode) & 1 ? GPUMapMode.READ : GPUMapMode.WRITE, offset, size).then(function () {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [1], "", [cb.u1, cb.u2]); });
    }, function (e) {
      TernWGPU.later(function () { TernWGPU.callWithMessage(cb.fn, [3], String(e), [cb.u1, cb.u2]); });
    });
    return TernWGPU.future();
  },
  tern_wgpuBufferGetConstMappedRange__deps: ["$TernWGPU"],
  tern_wgpuBufferGetConstMappedRange: function (id, offset, size) {
    const b = TernWGPU.get(id);
    let bytes;
    try { bytes = new Uint8Array(b.getMappedRange(offset, size)); } catch (e) { return 0; }
    const p = _malloc(Math.max(1, bytes.length));
    HEAPU8.set(bytes, p);
    (b.ternCopies || (b.ternCopies = [])).push(p);
    return p;
  },
  tern_wgpuBufferUnmap__deps: ["$TernWGPU"],
  tern_wgpuBufferUnmap: function (id) {
    const b = TernWGPU.get(id);
    (b.ternCopies || []).forEach(function (p) { _free(p); });
    b.ternCopies = [];
    b.unmap();
  },
  tern_wgpuBufferDestroy__deps: ["$TernWGPU"],
  tern_wgpuBufferDestroy: function (id) { TernWGPU.get(id).destroy(); },
  tern_wgpuBufferRelease__deps: ["$TernWGPU"],
  tern_wgpuBufferRelease: function (id) { TernWGPU.release(id); },

  tern_wgpuCommandEncoderBeginComputePass__deps: ["$TernWGPU"],
  tern_wgpuCommandEncoderBeginComputePass: function (id, desc) {
    const L = TernWGPU.layout(), d = {};
    const tw = desc ? TernWGPU.u32(desc + L["ComputePassDescriptor.timestampWrites"]) : 0;
    if (tw) {
      d.timestampWrites = { querySet: TernWGPU.get(TernWGPU.u32(tw + L["PassTimestampWrites.querySet"])),
                            beginningOfPassWriteIndex: TernWGPU.u32(tw + L["PassTimestampWrites.beginningOfPassWriteIndex"]),
                            endOfPassWriteIndex: TernWGPU.u32(tw + L["PassTimestampWrites.endOfPassWriteIndex"]) };
    }
    return TernWGPU.add(TernWGPU.get(id).beginComputePass(d));
  },
  tern_wgpuCommandEncoderCopyBufferToBuffer__deps: ["$TernWGPU"],
  tern_wgpuCommandEncoderCopyBufferToBuffer: function (id, src, srcOffset, dst, dstOffset, size) {
    TernWGPU.get(id).copyBufferToBuffer(TernWGPU.get(src), Number(srcOffset), TernWGPU.get(dst), Number(dstOffset), Number(size));
  },
  tern_wgpuCommandEncoderFinish__deps: ["$TernWGPU"],
  tern_wgpuCommandEncoderFinish: function (id, desc) { return TernWGPU.add(TernWGPU.get(id).finish()); },
  tern_wgpuCommandEncoderResolveQuerySet__deps: ["$TernWGPU"],
  tern_wgpuCommandEncoderResolveQuerySet: function (id, qs, first, count, dst, offset) {
    TernWGPU.get(id).resolveQuerySet(TernWGPU.get(qs), first, count, TernWGPU.get(dst), Number(offset));
  },
  tern_wgpuCommandEncoderRelease__deps: ["$TernWGPU"],
  tern_wgpuCommandEncoderRelease: function (id) { TernWGPU.release(id); },
  tern_wgpuCommandBufferRelease__deps: ["$TernWGPU"],
  tern_wgpuCommandBufferRelease: function (id) { TernWGPU.release(id); },
  // A compute pass's setPipeline / setBindGroup / dispatchWorkgroups, one call per pass: the command
  // list that src/backend/webgpu/wgpu_command_list.h wrote in the heap (`count` u32 words at `words`;
  // that file documents the layout), issued from this loop with the objects straight from the id
  // table. Dynamic offsets go to setBindGroup as a JavaScript array, which dawn.node takes faster than
  // the heap's Uint32Array with start and length (H200, 2026-11-28: 1.63 vs 2.25 us per call).
  tern_wgpuComputePassEncoderReplay__deps: ["$TernWGPU"],
  tern_wgpuComputePassEncoderReplay: function (id, words, count) {
    const pass = TernWGPU.objs[id], objs = TernWGPU.objs, h = HEAPU32, one = TernWGPU.oneOffset;
    let i = words >> 2;
    const end = i + count;
    while (i < end) {
      const op = h[i];
      switch (op & 0xFF) {
        case 1: pass.setPipeline(objs[h[i + 1]]); i += 2; break;
        case 2: {
          const n = op >>> 16, index = (op >>> 8) & 0xFF, g = objs[h[i + 1]];
          if (n === 0) pass.setBindGroup(index, g);
          else if (n === 1) { one[0] = h[i + 2]; pass.setBindGroup(index, g, one); }
          else pass.setBindGroup(index, g, Array.from(h.subarray(i + 2, i + 2 + n)));
          i += 2 + n;
          break;
        }
        case 3: pass.dispatchWorkgroups(h[i + 1], h[i + 2], h[i + 3]); i += 4; break;
        case 4: pass.dispatchWorkgroups(h[i + 1]); i += 2; break;
        case 5: pass.dispatchWorkgroups(h[i + 1], h[i + 2]); i += 3; break;
        default: throw new Error("tern_wgpuComputePassEncoderReplay: bad command word " + op + " at " + (i - (words >> 2)));
      }
    }
  },
  tern_wgpuComputePassEncoderEnd__deps: ["$TernWGPU"],
  tern_wgpuComputePassEncoderEnd: function (id) { TernWGPU.get(id).end(); },
  tern_wgpuComputePassEncoderRelease__deps: ["$TernWGPU"],
  tern_wgpuComputePassEncoderRelease: function (id) { TernWGPU.release(id); },
});
