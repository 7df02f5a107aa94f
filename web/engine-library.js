// The engine's JavaScript imports (an Emscripten JS library, linked by apps/web/CMakeLists.txt).
// tern_web_token: WebEngine::generate hands each token here (apps/web/tern_web.cpp); it calls the
// callback web/tern-engine.js set for the running generation (Module.ternOnToken) and returns its
// answer, 1 to go on or 0 to stop. Under JSPI the callback returns a promise (the worker posts the
// token and yields to its event loop) and tern-engine.js wraps this import in WebAssembly.Suspending,
// so the WebAssembly stack waits for it; without JSPI the callback answers at once.
// tern_web_progress: a load's progress (bytes of weights read, of all), to Module.ternOnProgress.
mergeInto(LibraryManager.library, {
  tern_web_progress: function (done, total) {
    if (Module["ternOnProgress"]) Module["ternOnProgress"](done, total);
  },
  tern_web_token: function (id, text, nBytes) {
    return Module["ternOnToken"](id, UTF8ToString(text, nBytes));
  },
});
