// A static file server for the browser build's site (scripts/serve-web.sh, and the page test):
// GET/HEAD of files under one folder, with MIME types for .html .js .css .wasm .gguf .png; 404 for
// anything else, 405 for other methods; paths outside the folder are refused.
// As a script: node static_server.mjs DIR PORT. As a module: serveStatic(dir, port) -> http.Server.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript",
                ".css": "text/css; charset=utf-8", ".wasm": "application/wasm", ".gguf": "application/octet-stream",
                ".png": "image/png", ".json": "application/json" };

export function serveStatic(dir, port = 0, host = "127.0.0.1") {
  const rootDir = path.resolve(dir);
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") { res.writeHead(405, { allow: "GET, HEAD" }).end(); return; }
    let rel;
    try { rel = decodeURIComponent(new URL(req.url, "http://x").pathname); } catch { res.writeHead(400).end(); return; }
    if (rel.endsWith("/")) rel += "index.html";
    const file = path.resolve(rootDir, "." + rel);
    if (!file.startsWith(rootDir + path.sep)) { res.writeHead(403).end(); return; }
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) { res.writeHead(404, { "content-type": "text/plain" }).end("not found\n"); return; }
      res.writeHead(200, { "content-type": types[path.extname(file)] || "application/octet-stream",
                           "content-length": st.size, "cache-control": "no-cache" });
      if (req.method === "HEAD") { res.end(); return; }
      fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir, port] = process.argv.slice(2);
  const server = await serveStatic(dir, Number(port || 8088));
  console.log(`serving ${dir} on http://127.0.0.1:${server.address().port}/`);
}
