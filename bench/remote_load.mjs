#!/usr/bin/env node
// Load client for bench/remote_load.py: N concurrent ACP v2 connections to one server over WebSocket or Streamable
// HTTP, each running one `stream S` turn and then K sequential `echo` turns. Raw protocol (no SDK client), so the
// client costs the same against every server. Prints one JSON line: counts, wall time, echo latencies.
//
//   node bench/remote_load.mjs <url> <ws|http> <N> <K> <S>

import process from "node:process";

import { WebSocket } from "ws";

const [url, transport, n, k, s] = process.argv.slice(2);
const N = Number(n);
const K = Number(k);
const S = Number(s);
const INIT = { protocolVersion: 2, info: { name: "load", version: "0" }, capabilities: {} };

class Waiters {
  constructor() {
    this.byId = new Map();
    this.turnEnd = null;
  }
  deliver(message) {
    if ("id" in message && !("method" in message)) {
      const waiter = this.byId.get(message.id);
      if (waiter) {
        this.byId.delete(message.id);
        waiter(message);
      }
      return;
    }
    const update = message.params?.update;
    if (update?.sessionUpdate === "state_update" && update.state === "idle" && update.stopReason && this.turnEnd) {
      const done = this.turnEnd;
      this.turnEnd = null;
      done(update);
    }
  }
  answer(id) {
    return new Promise((resolve) => this.byId.set(id, resolve));
  }
  idle() {
    return new Promise((resolve) => {
      this.turnEnd = resolve;
    });
  }
}

async function wsConnection() {
  const waiters = new Waiters();
  const ws = new WebSocket(url.replace(/^http/, "ws"));
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  ws.on("message", (data) => waiters.deliver(JSON.parse(data.toString())));
  let nextId = 0;
  const call = (method, params) => {
    const id = nextId++;
    const answer = waiters.answer(id);
    ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return answer;
  };
  await call("initialize", INIT);
  const sid = (await call("session/new", { cwd: "/tmp" })).result.sessionId;
  return { call, sid, waiters, close: () => ws.close() };
}

async function* sseMessages(body) {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of body) {
    pending += decoder.decode(chunk, { stream: true });
    const events = pending.split("\n\n");
    pending = events.pop();
    for (const event of events) {
      for (const line of event.split("\n")) {
        if (line.startsWith("data: ")) yield JSON.parse(line.slice(6));
      }
    }
  }
}

async function httpConnection() {
  const waiters = new Waiters();
  const json = { "content-type": "application/json" };
  const init = await fetch(url, { method: "POST", headers: json, body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: INIT }) });
  if (init.status !== 200) throw new Error(`initialize: ${init.status}`);
  await init.json();
  const cid = init.headers.get("acp-connection-id");
  const aborts = new AbortController();
  const listen = async (headers) => {
    const response = await fetch(url, { headers: { accept: "text/event-stream", "acp-connection-id": cid, ...headers }, signal: aborts.signal });
    if (response.status !== 200) throw new Error(`GET: ${response.status}`);
    void (async () => {
      try {
        for await (const message of sseMessages(response.body)) waiters.deliver(message);
      } catch {}
    })();
  };
  await listen({});
  let nextId = 1;
  const post = async (method, params, sid) => {
    const id = nextId++;
    const answer = waiters.answer(id);
    const headers = { ...json, "acp-connection-id": cid, ...(sid ? { "acp-session-id": sid } : {}) };
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id, method, params }) });
    if (response.status !== 202) throw new Error(`POST ${method}: ${response.status}`);
    await response.arrayBuffer();
    return answer;
  };
  const sid = (await post("session/new", { cwd: "/tmp" })).result.sessionId;
  await listen({ "acp-session-id": sid }); // the TypeScript server answers session requests on the session's stream
  return {
    call: (method, params) => post(method, params, params.sessionId),
    sid,
    waiters,
    close: async () => {
      await fetch(url, { method: "DELETE", headers: { "acp-connection-id": cid } });
      aborts.abort();
    },
  };
}

async function turn(connection, text) {
  const idle = connection.waiters.idle();
  const answer = connection.call("session/prompt", { sessionId: connection.sid, prompt: [{ type: "text", text }] });
  const [response, end] = await Promise.all([answer, idle]);
  if (!response.result || end.stopReason !== "end_turn") throw new Error(`bad turn: ${JSON.stringify(response)}`);
}

const open = transport === "ws" ? wsConnection : httpConnection;
const started = performance.now();
const connections = await Promise.all(Array.from({ length: N }, () => open()));
const connected = performance.now();
const latencies = [];
let failures = 0;
await Promise.all(
  connections.map(async (connection) => {
    try {
      await turn(connection, `stream ${S}`);
      for (let i = 0; i < K; i++) {
        const t0 = performance.now();
        await turn(connection, `echo hello ${i}`);
        latencies.push(performance.now() - t0);
      }
    } catch (error) {
      failures += 1;
      process.stderr.write(`connection failed: ${error} ${error?.cause ?? ""}\n`);
    }
  }),
);
const finished = performance.now();
await Promise.all(connections.map((connection) => connection.close()));
latencies.sort((a, b) => a - b);
const pick = (q) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)];
process.stdout.write(`${JSON.stringify({
  transport, connections: N, echoTurns: latencies.length, streamChunks: N * S, failures,
  connectSeconds: (connected - started) / 1000, runSeconds: (finished - connected) / 1000,
  p50ms: pick(0.5), p99ms: pick(0.99),
})}\n`);
process.exit(0);
