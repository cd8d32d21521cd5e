#!/usr/bin/env node
// Reconnect with the official ACP TypeScript SDK's remote clients: a client loses its connection to a served agent
// and resumes its session on a new one.
//
//   ACP_INTEROP_URL=http://127.0.0.1:PORT/acp ACP_INTEROP_TRANSPORT=http|ws node tests/interop/reconnect_client.mjs
//
// Connection A (createHttpStream / createWebSocketStream) creates a session and runs a prompt, then loses its
// network: over HTTP every fetch of A is aborted and fails from then on (no DELETE reaches the server; its event
// stream is cut), over WebSocket the socket is destroyed without a close frame. Connection B, a new stream with the
// same cookie store, initializes, finds the session in session/list, resumes it with replayFrom {type: "start"}
// (the replay must hold A's prompt and reply, then a current-state snapshot), runs another prompt and closes it.
// Every message in both directions is written as JSON lines to ACP_RECONNECT_LOG_A / ACP_RECONNECT_LOG_B
// ({"from": "agent" | "client", "message"}). Exit 0 and a one-line JSON summary on stdout, else exit 1.

import { appendFileSync, writeFileSync } from "node:fs";
import process from "node:process";

import { client, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { MemoryAcpCookieStore } from "@agentclientprotocol/sdk/experimental/http-client";

const TIMEOUT_MS = 30_000;
const url = process.env.ACP_INTEROP_URL;
const transport = process.env.ACP_INTEROP_TRANSPORT ?? "http";
const logs = { A: process.env.ACP_RECONNECT_LOG_A, B: process.env.ACP_RECONNECT_LOG_B };
for (const path of Object.values(logs)) if (path) writeFileSync(path, "");
const counts = { A: { agent: 0, client: 0 }, B: { agent: 0, client: 0 } };
const cookies = new MemoryAcpCookieStore(); // kept across reconnects (affinity)

function fail(message, detail) {
  process.stderr.write(`reconnect_client: ${message}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}\n`);
  process.exit(1);
}

function check(condition, message, detail) {
  if (!condition) fail(message, detail);
}

setTimeout(() => fail(`timed out after ${TIMEOUT_MS / 1000} s`), TIMEOUT_MS).unref();

/** A remote stream for connection `name`, every message logged; `drop()` makes it lose its network. */
async function openStream(name) {
  const dropped = new AbortController();
  let inner;
  if (transport === "ws") {
    const { createWebSocketStream } = await import("@agentclientprotocol/sdk/experimental/ws-client");
    const { WebSocket } = await import("ws");
    const sockets = [];
    class TrackedWebSocket extends WebSocket {
      constructor(...args) {
        super(...args);
        sockets.push(this);
      }
    }
    inner = createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket: TrackedWebSocket, cookieStore: cookies });
    dropped.signal.addEventListener("abort", () => sockets.forEach((socket) => socket.terminate()));
  } else {
    const { createHttpStream } = await import("@agentclientprotocol/sdk/experimental/http-client");
    const lossyFetch = (input, init = {}) => {
      if (dropped.signal.aborted) return Promise.reject(new TypeError("fetch failed: network is down"));
      const signal = init.signal ? AbortSignal.any([init.signal, dropped.signal]) : dropped.signal;
      return fetch(input, { ...init, signal });
    };
    inner = createHttpStream(url, { fetch: lossyFetch, cookieStore: cookies });
  }
  const log = (from, message) => {
    counts[name][from] += 1;
    if (logs[name]) appendFileSync(logs[name], `${JSON.stringify({ from, message })}\n`);
  };
  const reader = inner.readable.getReader();
  const writer = inner.writable.getWriter();
  const stream = {
    readable: new ReadableStream({
      async pull(controller) {
        let result;
        try {
          result = await reader.read();
        } catch {
          controller.close();
          return;
        }
        if (result.done) {
          controller.close();
          return;
        }
        log("agent", result.value);
        controller.enqueue(result.value);
      },
    }),
    writable: new WritableStream({
      async write(message) {
        log("client", message);
        await writer.write(message);
      },
      async close() {
        await writer.close().catch(() => {});
      },
    }),
  };
  return { stream, drop: () => dropped.abort(), close: () => writer.close().catch(() => {}) };
}

const updates = { A: [], B: [] };
let phase = "A";
const app = client({ name: "acp-agent-reconnect" })
  .onRequest("*", ({ method }) => {
    throw RequestError.methodNotFound(method);
  })
  .onNotification("session/update", ({ params }) => {
    updates[phase].push(params);
  })
  .onNotification("*", () => {});

const INITIALIZE = {
  protocolVersion: 2,
  info: { name: "acp-agent-reconnect", version: "0.0.0" },
  capabilities: {},
};

function textsOf(list, kind) {
  const texts = [];
  for (const { update } of list) {
    if (update.sessionUpdate !== kind && update.sessionUpdate !== `${kind}_chunk`) continue;
    const blocks = Array.isArray(update.content) ? update.content : [update.content];
    texts.push(blocks.filter((block) => block?.type === "text").map((block) => block.text).join(""));
  }
  return texts.join("");
}

async function promptToIdle(ctx, list, sessionId, text) {
  const before = list.length;
  await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  for (;;) {
    const idle = list
      .slice(before)
      .some(({ update }) => update.sessionUpdate === "state_update" && update.state === "idle" && update.stopReason);
    if (idle) return list.slice(before);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Connection A: a session, a prompt, then the network goes away.
const a = await openStream("A");
const connectionA = app.connect(a.stream);
const ctxA = connectionA.agent;
await ctxA.request("initialize", INITIALIZE);
const created = await ctxA.request("session/new", { cwd: process.cwd() });
const sessionId = created.sessionId;
const turnA = await promptToIdle(ctxA, updates.A, sessionId, "said before the connection was lost");
check(textsOf(turnA, "agent_message") === "said before the connection was lost", "A: echo", turnA);
a.drop();
connectionA.close();

// Connection B: initialize again, find the session, resume it with replay, go on.
phase = "B";
const b = await openStream("B");
const summary = await app.connectWith(b.stream, async (ctx) => {
  await ctx.request("initialize", INITIALIZE);
  const listed = await ctx.request("session/list", {});
  check(listed.sessions.some((s) => s.sessionId === sessionId), "B: the session is not listed", listed);
  let resumed;
  try {
    resumed = await ctx.request("session/resume", { sessionId, cwd: process.cwd(), replayFrom: { type: "start" } });
  } catch (error) {
    fail("B: session/resume failed", { code: error.code, message: error.message, data: error.data });
  }
  const replay = updates.B.filter((params) => params.sessionId === sessionId);
  check(textsOf(replay, "user_message") === "said before the connection was lost", "B: replayed user text", replay);
  check(textsOf(replay, "agent_message") === "said before the connection was lost", "B: replayed agent text", replay);
  const last = replay.at(-1)?.update;
  check(last?.sessionUpdate === "state_update" && last.state === "idle", "B: no snapshot after the replay", last);
  const turnB = await promptToIdle(ctx, updates.B, sessionId, "said after resuming");
  check(textsOf(turnB, "agent_message") === "said after resuming", "B: echo after resume", turnB);
  const closed = await ctx.request("session/close", { sessionId });
  return { resumed, replayed: replay.length, closed };
});
await b.close();

process.stdout.write(
  `${JSON.stringify({ ok: true, transport, sessionId, ...summary, messages: counts })}\n`,
);
process.exit(0);
