// Bundles the stock clients (page_entry.mjs) for the browser page with esbuild.
import * as esbuild from "esbuild";

await esbuild.build({
  entryPoints: [new URL("page_entry.mjs", import.meta.url).pathname],
  bundle: true,
  format: "iife",
  globalName: "Clients",
  platform: "browser",
  outfile: new URL("dist/clients.js", import.meta.url).pathname,
  logLevel: "warning",
});
