#!/usr/bin/env node
// The bench workload (bench/agents/ts_agent.mjs's `echo` / `stream`) served remotely by the official TypeScript
// SDK 2.4.0's `AcpServer` on Node's http server: Streamable HTTP and WebSocket (the `ws` package) on /acp.
//
//   node bench/agents/ts_http_server.mjs   -> prints `listening http://127.0.0.1:<port>/acp` on stderr
//
// The SDK and `ws` come from tests/interop/node_modules (`npm ci` there).

import { createServer } from "node:http";
import process from "node:process";

import { agent, methods, RequestError } from "@agentclientprotocol/sdk/experimental/v2";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

function createAgent() {
  const sessions = new Set();
  let counter = 0;
  const nextId = (prefix) => `${prefix}_${++counter}`;
  const update = (client, sessionId, body) =>
    client.notify(methods.client.session.update, { sessionId, update: body });

  async function runTurn(client, params, userMessageId) {
    const { sessionId, prompt } = params;
    await update(client, sessionId, { sessionUpdate: "user_message", messageId: userMessageId, content: prompt });
    await update(client, sessionId, { sessionUpdate: "state_update", state: "running", background: [] });
    const text = prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ");
    const space = text.indexOf(" ");
    const command = space < 0 ? text : text.slice(0, space);
    const argument = space < 0 ? "" : text.slice(space + 1);
    const messageId = nextId("msg");
    if (command === "stream") {
      const count = Number.parseInt(argument, 10);
      for (let i = 0; i < count; i++) {
        await update(client, sessionId, {
          sessionUpdate: "agent_message_chunk", messageId, content: { type: "text", text: `chunk ${i} ` },
        });
      }
    } else {
      await update(client, sessionId, {
        sessionUpdate: "agent_message", messageId, content: [{ type: "text", text: argument }],
      });
    }
    await update(client, sessionId, { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn", background: [] });
  }

  return agent({ name: "bench-ts-agent" })
    .onRequest(methods.agent.initialize, () => ({
      protocolVersion: 2, info: { name: "bench-ts-agent", version: "1.0.0" }, capabilities: { session: {} },
    }))
    .onRequest(methods.agent.session.new, () => {
      const sessionId = nextId("sess");
      sessions.add(sessionId);
      return { sessionId };
    })
    .onRequest(methods.agent.session.prompt, ({ params, client }) => {
      if (!sessions.has(params.sessionId)) throw RequestError.sessionNotFound(params.sessionId);
      const messageId = nextId("msg_user");
      void runTurn(client, params, messageId).catch((e) => process.stderr.write(`turn failed: ${e}\n`));
      return { messageId };
    })
    .onNotification(methods.agent.session.cancel, () => {});
}

const acp = new AcpServer({ createAgent });
const handle = createNodeHttpHandler(acp);
const wss = new WebSocketServer({ noServer: true });
const upgrade = createNodeWebSocketUpgradeHandler(acp, wss);
const server = createServer((req, res) => {
  if (new URL(req.url ?? "/", "http://x").pathname !== "/acp") {
    res.writeHead(404).end();
    return;
  }
  handle(req, res);
});
server.on("upgrade", upgrade);
server.listen(0, "127.0.0.1", () => {
  process.stderr.write(`listening http://127.0.0.1:${server.address().port}/acp\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, async () => {
    await acp.close();
    server.close();
    process.exit(0);
  });
}
