// Drives the playground at URL in headless Debian chromium with
// playwright-core, as a developer would: a 422 shown inline, a streamed turn
// with thinking, a host action answered (success and failure), a silent
// decision, steering and cancel, and the session tree. Saves a screenshot and
// prints one JSON document: {"steps": [{"name", "ok", "detail"}], "error"}.
//
// usage: node playground.mjs URL SCREENSHOT_PATH [TOKEN]
// With TOKEN (the server's ACCESS__LOCAL_TOKEN) it runs the token steps
// instead: refused without it, connected with it, kept across a reload.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Generous bounds: the test asserts "eventually", never a timing.
const WAIT_MS = 20000;
const [url, screenshotPath, token] = process.argv.slice(2);
const result = { steps: [], error: null, console_errors: [] };

const userDataDir = mkdtempSync(join(tmpdir(), "ar-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1400, height: 900 },
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(WAIT_MS);
page.on("console", (message) => {
  if (message.type() === "error") result.console_errors.push(message.text());
});
page.on("pageerror", (error) => result.console_errors.push(String(error)));

async function step(name, body) {
  try {
    const detail = await body();
    result.steps.push({ name, ok: true, detail: detail ?? null });
  } catch (error) {
    result.steps.push({ name, ok: false, detail: String(error.message || error) });
    throw error;
  }
}

const text = (selector) => page.locator(selector).innerText();
const lastEnding = () => page.locator(".ending").last();

async function sendMessage(message) {
  await page.fill("#message", message);
  await page.click("#send");
}

async function tokenSteps() {
  await step("is refused without the token", async () => {
    await page.goto(url);
    await page.locator('#log .event[data-event="connect_error"]').first().waitFor();
    return await text("#status");
  });

  await step("connects with the token", async () => {
    await page.fill("#token", token);
    await page.locator("#token").dispatchEvent("change");
    await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  });

  await step("keeps the token in the tab across a reload", async () => {
    await page.reload();
    await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
    const kept = await page.inputValue("#token");
    if (kept !== token) throw new Error(`token field holds ${JSON.stringify(kept)}`);
  });

  await step("streams a turn and lists sessions with the token", async () => {
    await sendMessage("say with a token");
    await page.locator(".assistant .text", { hasText: "with a token" }).waitFor();
    const session = await page.inputValue("#session");
    await page.click("#refresh-sessions");
    await page.locator(`#sessions a[data-session-id="${session}"]`).waitFor();
  });
}

async function mainSteps() {
  await step("connects", async () => {
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  });

  await step("shows a 422 path inline", async () => {
    const original = await page.inputValue("#host-context");
    const bad = JSON.parse(original);
    bad.view.colour = "red";
    await page.fill("#host-context", JSON.stringify(bad, null, 2));
    await sendMessage("say hi");
    await page.waitForFunction(() => document.getElementById("context-error").textContent.includes("host_context.view.colour"));
    const shown = await text("#context-error");
    // The message is marked refused, not sent.
    await page.locator("#transcript .user.refused", { hasText: "say hi" }).waitFor();
    await page.fill("#host-context", original);
    return shown;
  });

  await step("streams thinking and text", async () => {
    await sendMessage("think pondering the list\nsay Hello from the playground");
    await page.locator(".assistant .text", { hasText: "Hello from the playground" }).waitFor();
    await page.locator(".assistant .thinking", { hasText: "pondering the list" }).waitFor();
    await page.locator('#log .event[data-event="assistant:text_delta"]').first().waitFor();
    return await page.locator("#log .event").count();
  });

  await step("answers a host action with success", async () => {
    await sendMessage('call select_issue {"number": 42}');
    await page.locator("#pending").waitFor({ state: "visible" });
    await page.locator(".tool-call.host", { hasText: "select_issue" }).first().waitFor();
    await page.fill("#result", '{"selected": 42}');
    await page.click("#answer-success");
    await page.locator(".assistant .text", { hasText: "Tool results: select_issue" }).first().waitFor();
    return await text("#pending-call");
  });

  await step("answers a host action with failure", async () => {
    await sendMessage('call select_issue {"number": 43}');
    await page.locator("#pending").waitFor({ state: "visible" });
    await page.fill("#result", '{"error": "no such issue"}');
    await page.click("#answer-failed");
    await page.locator("#pending").waitFor({ state: "hidden" });
    await page.waitForFunction(() => document.querySelectorAll(".assistant .text").length >= 3 &&
      [...document.querySelectorAll(".assistant .text")].pop().textContent.includes("select_issue"));
    return await page.locator(".assistant .text").last().innerText();
  });

  await step("draws a turn that opens with a host call in its own box", async () => {
    await sendMessage('call select_issue {"number": 44}');
    await page.locator("#pending").waitFor({ state: "visible" });
    const placed = await page.evaluate(() => {
      const turn = [...document.querySelectorAll("#transcript .turn")].pop();
      const call = turn.querySelector(".assistant .tool-call.host");
      const earlier = [...document.querySelectorAll("#transcript .turn")].slice(0, -1)
        .some((other) => other.textContent.includes('{"number":44}'));
      return { user: turn.querySelector(".user").textContent, call: call ? call.textContent : null, earlier };
    });
    if (!placed.call || !placed.call.includes('"number":44') || placed.earlier) {
      throw new Error(`the call is not in its own turn's box: ${JSON.stringify(placed)}`);
    }
    await page.fill("#result", '{"selected": 44}');
    await page.click("#answer-success");
    await page.locator("#pending").waitFor({ state: "hidden" });
    await page.waitForFunction(() => {
      const turn = [...document.querySelectorAll("#transcript .turn")].pop();
      return [...turn.querySelectorAll(".assistant .text")].some((text) => text.textContent.includes("select_issue"));
    });
    return placed;
  });

  await step("runs a silent decision", async () => {
    // A decision gets a fresh session of its own; the conversation stays on screen.
    const conversation = await page.inputValue("#session");
    await page.fill("#session", `decision-${Date.now()}`);
    await page.check("#silent");
    await sendMessage("hold");
    await lastEnding().filter({ hasText: "decision: hold" }).waitFor();
    await page.uncheck("#silent");
    await page.fill("#session", conversation);
    return await lastEnding().innerText();
  });

  await step("steers and cancels a live turn", async () => {
    await sendMessage("slow 400\nsay one two three four five six seven eight nine ten");
    await page.locator(".assistant .text", { hasText: "one" }).waitFor();
    await page.fill("#message", "say steered");
    await page.click("#steer");
    await page.waitForFunction(() => [...document.querySelectorAll("#log .event")]
      .some((line) => line.dataset.event === "ack assistant_message" && line.textContent.includes('"accepted_as":"steering"')));
    await page.click("#cancel");
    await lastEnding().filter({ hasText: "error: cancelled" }).waitFor();
    return await lastEnding().innerText();
  });

  await step("browses sessions and a tree", async () => {
    const session = await page.inputValue("#session");
    await page.click("#refresh-sessions");
    await page.locator(`#sessions a[data-session-id="${session}"]`).click();
    await page.waitForFunction(() => document.getElementById("tree").textContent.includes("assistant"));
    return (await text("#tree")).split("\n").length;
  });
}

try {
  await (token ? tokenSteps() : mainSteps());
  await page.screenshot({ path: screenshotPath, fullPage: true });
} catch (error) {
  result.error = String(error.message || error);
  try { await page.screenshot({ path: screenshotPath, fullPage: true }); } catch {}
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
  console.log(JSON.stringify(result));
}
