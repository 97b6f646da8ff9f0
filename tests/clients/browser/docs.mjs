// Opens the Swagger UI page at URL in headless Debian chromium and prints
// {"operations": <count of rendered operations>, "title", "error", "console_errors"}.
// Every request stays on the server under test (the UI is vendored).
//
// usage: node docs.mjs URL
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Generous bound: the test asserts "eventually", never a timing.
const WAIT_MS = 20000;
const [url] = process.argv.slice(2);
const result = { operations: 0, title: null, error: null, console_errors: [], foreign_requests: [] };
const origin = new URL(url).origin;

const userDataDir = mkdtempSync(join(tmpdir(), "ar-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(WAIT_MS);
page.on("console", (message) => { if (message.type() === "error") result.console_errors.push(message.text()); });
page.on("request", (request) => {
  const target = request.url();
  if (!target.startsWith(origin) && !target.startsWith("data:")) result.foreign_requests.push(target);
});
try {
  await page.goto(url);
  await page.locator(".opblock").first().waitFor();
  result.operations = await page.locator(".opblock").count();
  result.title = await page.locator(".info .title").innerText();
  if (result.foreign_requests.length) result.error = "requests left the server";
} catch (error) {
  result.error = String(error.message || error);
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  console.log(JSON.stringify(result));
}
