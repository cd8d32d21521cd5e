#!/usr/bin/env node
// The bench workload written with the official TypeScript SDK, @agentclientprotocol/sdk@2.4.0, experimental v2
// `AgentApp` API (ACP v2 on stdio):
//
//   stream N   -> N `agent_message_chunk` updates sharing one messageId, then `idle` `end_turn`
//   echo TEXT  -> one complete `agent_message` with TEXT, then `idle` `end_turn`
//
// Run: node bench/agents/ts_agent.mjs   (the SDK comes from bench/node_modules, `npm ci` in bench/)

import { Readable, Writable } from "node:stream";

import { agent, methods, ndJsonStream, RequestError } from "@agentclientprotocol/sdk/experimental/v2";

const sessions = new Set();
let counter = 0; // short ids (sess_1, msg_2, ...) keep the lines the same size as the other agents'
const nextId = (prefix) => `${prefix}_${++counter}`;

async function update(client, sessionId, body) {
  await client.notify(methods.client.session.update, { sessionId, update: body });
}

// One prompt turn, after the prompt was answered with its messageId: echo, running, the reply, idle end_turn.
async function runTurn(client, params, userMessageId) {
  const { sessionId, prompt } = params;
  await update(client, sessionId, { sessionUpdate: "user_message", messageId: userMessageId, content: prompt });
  await update(client, sessionId, { sessionUpdate: "state_update", state: "running", background: [] });
  const text = prompt
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join(" ");
  const space = text.indexOf(" ");
  const command = space < 0 ? text : text.slice(0, space);
  const argument = space < 0 ? "" : text.slice(space + 1);
  const messageId = nextId("msg");
  if (command === "stream") {
    const count = Number.parseInt(argument, 10);
    for (let i = 0; i < count; i++) {
      await update(client, sessionId, {
        sessionUpdate: "agent_message_chunk",
        messageId,
        content: { type: "text", text: `chunk ${i} ` },
      });
    }
  } else {
    const reply = command === "echo" ? argument : `unknown command: ${command}`;
    await update(client, sessionId, {
      sessionUpdate: "agent_message",
      messageId,
      content: [{ type: "text", text: reply }],
    });
  }
  await update(client, sessionId, { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn", background: [] });
}

const app = agent({ name: "bench-ts-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: 2,
    info: { name: "bench-ts-agent", version: "1.0.0" },
    capabilities: { session: {} },
  }))
  .onRequest(methods.agent.session.new, () => {
    const sessionId = nextId("sess");
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, ({ params, client }) => {
    if (!sessions.has(params.sessionId)) throw RequestError.sessionNotFound(params.sessionId);
    const messageId = nextId("msg_user");
    void runTurn(client, params, messageId).catch((error) => {
      process.stderr.write(`bench ts agent: turn failed: ${error?.stack ?? error}\n`);
    });
    return { messageId };
  })
  .onNotification(methods.agent.session.cancel, () => {});

const output = Writable.toWeb(process.stdout);
const input = Readable.toWeb(process.stdin);
const connection = app.connect(ndJsonStream(output, input));
await connection.closed;
