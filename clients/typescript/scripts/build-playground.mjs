// Bundles the client (with socket.io-client) into one browser script for the
// playground, vendored at src/playground/assets/assistant-client.js: the
// page gets `window.AssistantRuntime.AssistantClient`. Run by `npm run build`;
// commit the result when it changes (the binary embeds it).
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const pkg = JSON.parse(await (await import("node:fs/promises")).readFile(join(root, "package.json"), "utf8"));

await build({
  entryPoints: [join(root, "dist/index.js")],
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "AssistantRuntime",
  target: "es2019",
  legalComments: "none",
  banner: {
    js: `/*! ${pkg.name} ${pkg.version} (MIT), bundled with socket.io-client (MIT) by clients/typescript/scripts/build-playground.mjs */`,
  },
  outfile: join(root, "../../src/playground/assets/assistant-client.js"),
});
