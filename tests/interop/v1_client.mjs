#!/usr/bin/env node
// Drives an acp-agent example with the official TypeScript SDK's stable v1 client (the package's main entry point).
//
//   node tests/interop/v1_client.mjs {echo|background} <python> <path/to/agent.py>
//
// Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr on any failed check,
// anything the SDK reports (console.error, a session/update its v1 zod schema rejects, an error answer from the
// client to the agent) or a timeout. ACP_INTEROP_TRANSCRIPT / ACP_INTEROP_CLIENT_TRANSCRIPT receive every line the
// agent / the client wrote.

import { spawn } from "node:child_process";
import { appendFileSync, writeFileSync } from "node:fs";
import process from "node:process";

import { client, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";

const { zSessionNotification } = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url).href
);

const TIMEOUT_MS = 60_000;
const problems = [];
const report = (text) => problems.push(text);
const originalError = console.error;
console.error = (...args) => {
  report(`SDK console.error: ${args.map(String).join(" ")}`);
  originalError(...args);
};

const [, , scenarioName, python, agentScript] = process.argv;
if (!scenarioName || !python || !agentScript) {
  process.stderr.write("usage: node v1_client.mjs {echo|background} <python> <agent.py>\n");
  process.exit(2);
}
const agentLog = process.env.ACP_INTEROP_TRANSCRIPT;
const clientLog = process.env.ACP_INTEROP_CLIENT_TRANSCRIPT;
for (const path of [agentLog, clientLog]) if (path) writeFileSync(path, "");

// The agent process and a recording stream around its stdio.
const child = spawn(python, [agentScript], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("close", (code) => resolve(code)));
let pending = Buffer.alloc(0);
let inputOpen = true;
const input = new ReadableStream({
  cancel() {
    inputOpen = false;
  },
  start(controller) {
    child.stdout.on("data", (chunk) => {
      if (agentLog) appendFileSync(agentLog, chunk);
      pending = Buffer.concat([pending, chunk]);
      let index;
      while ((index = pending.indexOf(0x0a)) !== -1) {
        checkAgentLine(pending.subarray(0, index).toString("utf8"));
        pending = pending.subarray(index + 1);
      }
      if (inputOpen) controller.enqueue(new Uint8Array(chunk));
    });
    child.stdout.on("end", () => {
      if (inputOpen) controller.close();
      inputOpen = false;
    });
  },
});
const output = new WritableStream({
  write(chunk) {
    const text = Buffer.from(chunk).toString("utf8");
    if (clientLog) appendFileSync(clientLog, text);
    for (const line of text.split("\n").filter((l) => l.trim())) {
      const message = JSON.parse(line);
      if ("error" in message && !("method" in message)) report(`the client answered with an error: ${line}`);
    }
    return new Promise((resolve, reject) => child.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
  },
  close() {
    child.stdin.end();
  },
  abort() {
    child.stdin.end();
  },
});

function checkAgentLine(line) {
  const message = JSON.parse(line);
  if (message.method === "session/update") {
    const parsed = zSessionNotification.safeParse(message.params);
    if (!parsed.success) report(`the v1 SDK cannot parse this session/update: ${line}`);
  }
}

// The client app: collects updates, answers permission requests with the first allow option.
const updates = [];
const permissions = [];
let wake = () => {};
const app = client({ name: "v1-typescript-interop" })
  .onRequest("session/request_permission", ({ params }) => {
    permissions.push(params);
    const allow = params.options.find((o) => o.kind.startsWith("allow"));
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest("*", ({ method }) => {
    report(`unexpected request from the agent: ${method}`);
    throw RequestError.methodNotFound(method);
  })
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update);
    wake();
  })
  .onNotification("*", ({ method }) => report(`unexpected notification from the agent: ${method}`));

async function waitFor(predicate) {
  while (!predicate()) await new Promise((resolve) => (wake = resolve));
}
const textOf = (list, kind = "agent_message_chunk") =>
  list.filter((u) => u.sessionUpdate === kind && u.content.type === "text").map((u) => u.content.text).join("");
const toolIds = (start) => updates.slice(start).filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId);
function tool(id) {
  const state = {};
  for (const u of updates) {
    if ((u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.toolCallId === id) {
      Object.assign(state, u);
    }
  }
  return state;
}
const contentText = (t) => (t.content ?? []).map((c) => c.content?.text ?? "").join("");
const errorCode = (promise) => promise.then(() => "accepted", (e) => e.code);

async function echoScenario(agent, summary) {
  const { sessionId } = await agent.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  const prompt = (text) => agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  let start = updates.length;
  let reply = await prompt("hello interop");
  summary.first = { stopReason: reply.stopReason, agentText: textOf(updates.slice(start)) };
  const cancelled = prompt("cancel me");
  await agent.notify("session/cancel", { sessionId });
  summary.cancel = { stopReason: (await cancelled).stopReason };
  start = updates.length;
  reply = await prompt("still here after cancel");
  summary.afterCancel = { stopReason: reply.stopReason, agentText: textOf(updates.slice(start)) };
  start = updates.length;
  await agent.request("session/load", { sessionId, cwd: process.cwd(), mcpServers: [] });
  summary.load = {
    userText: textOf(updates.slice(start), "user_message_chunk"),
    agentText: textOf(updates.slice(start)),
  };
  summary.setMode = await errorCode(agent.request("session/set_mode", { sessionId, modeId: "fast" }));
  summary.authenticate = await errorCode(agent.request("authenticate", { methodId: "none" }));
  summary.close = await agent.request("session/close", { sessionId });
}

async function backgroundScenario(agent, summary) {
  const { sessionId } = await agent.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  const prompt = (text) => agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

  let start = updates.length;
  let reply = await prompt("/run echo ran-in-foreground");
  const [runId] = toolIds(start);
  const run = tool(runId);
  summary.run = { stopReason: reply.stopReason, status: run.status, kind: run.kind,
                  output: contentText(run).includes("ran-in-foreground") };

  start = updates.length;
  reply = await prompt("/bg sleep 0.5; echo bg-done");
  const [bgId] = toolIds(start);
  const atTurnEnd = tool(bgId).status;
  await waitFor(() => ["completed", "failed"].includes(tool(bgId).status));
  summary.bg = { stopReason: reply.stopReason, statusAtTurnEnd: atTurnEnd, finalStatus: tool(bgId).status,
                 output: contentText(tool(bgId)).includes("bg-done") };

  start = updates.length;
  reply = await prompt("/ask deploy");
  summary.ask = { stopReason: reply.stopReason, permissions: permissions.length,
                  agentText: textOf(updates.slice(start)) };

  start = updates.length;
  const sleeping = prompt("/run sleep 30");
  await waitFor(() => toolIds(start).length > 0);
  await agent.notify("session/cancel", { sessionId });
  summary.cancel = { stopReason: (await sleeping).stopReason };

  summary.close = await agent.request("session/close", { sessionId });
}

const summary = { sdk: "@agentclientprotocol/sdk", scenario: scenarioName };
const timer = setTimeout(() => {
  process.stderr.write(`timeout; summary so far: ${JSON.stringify(summary)}\n`);
  process.exit(1);
}, TIMEOUT_MS);
try {
  await app.connectWith(ndJsonStream(output, input), async (agent) => {
    const init = await agent.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "v1-typescript-interop", version: "0" },
    });
    summary.protocolVersion = init.protocolVersion;
    summary.agent = init.agentInfo?.name;
    summary.loadSession = init.agentCapabilities?.loadSession;
    await (scenarioName === "echo" ? echoScenario : backgroundScenario)(agent, summary);
  });
} catch (error) {
  report(`scenario failed: ${error instanceof Error ? error.stack : JSON.stringify(error)}`);
}
child.stdin.end();
summary.agentExitCode = await exited;
clearTimeout(timer);
if (problems.length > 0) {
  process.stderr.write(`${problems.join("\n")}\nsummary: ${JSON.stringify(summary)}\n`);
  process.exit(1);
}
summary.ok = true;
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
