#!/usr/bin/env node
// Drives examples/mcp_agent.py with the official ACP TypeScript SDK, which hosts an MCP server for the agent over
// ACP itself (MCP over ACP, unstable): the SDK's own `McpOverAcpProvider` serves `mcp/message` requests.
//
//   node tests/interop/mcp_client.mjs <python> <path/to/examples/mcp_agent.py>
//
// Scenario: `initialize` (the agent must advertise `session.mcp.acp`); a `calc` MCP server registered with the
// provider (tools `add`, which reports progress twice before answering, `divide`, which refuses a zero divisor
// with an MCP error, and `wait`, which never answers); `session/new` with its `type: "acp"` declaration; prompts
// `add {"a":2,"b":3}` (round trip: tools/list then tools/call, progress shown on the tool call, the result said),
// `divide {"a":1,"b":0}` (the inner MCP error said), `nope` (the agent lists the tools), `wait {}` +
// `session/cancel` (the agent withdraws the `mcp/message` request with `$/cancel_request`, which aborts the
// provider's handler; the turn ends cancelled); then the registration is disposed and `add` fails with the
// provider's -33001, which ends the turn with that error. Exit 0 and a one-line JSON summary on stdout on success;
// exit 1 with a message on stderr on any failed check, any error the SDK reports, or a timeout. Optional environment
// variables: ACP_INTEROP_TRANSCRIPT, ACP_INTEROP_CLIENT_TRANSCRIPT, ACP_INTEROP_WIRE (see harness.mjs).

import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import {
  client,
  MCP_PROTOCOL_VERSION,
  McpOverAcpProvider,
  McpProtocolError,
  methods,
} from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  allowClientErrors,
  check,
  checkResponses,
  clientMessages,
  refuseNotification,
  refuseRequest,
  run,
  setStep,
  setup,
  updatesOnlyFor,
} from "./harness.mjs";
import { agentTexts, clientAnswersTo, promptTurn, readUntilStop, waitFor, withdrawalsOf } from "./questions.mjs";

const OVERALL_TIMEOUT_MS = 45_000;
const EXPECTED_AGENT_NAME = "mcp-tool-agent";

await setup({
  name: "mcp_client",
  usage: "usage: node mcp_client.mjs <python> <path/to/mcp_agent.py>",
  wireEnv: true,
  describeZodErrors: true,
});

// ---------------------------------------------------------------------------------------------------------------
// The MCP server the client hosts, served by the SDK's provider.

const TOOLS = [
  {
    name: "add",
    title: "Add two numbers",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  },
  {
    name: "divide",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  },
  { name: "wait", inputSchema: { type: "object" } },
];

const calls = []; // every request the server handled: {method, tool, protocolVersion, clientInfo, aborted}

async function calc({ method, params, protocolVersion, clientInfo, signal, notify }) {
  const call = { method, tool: params?.name, protocolVersion, clientInfo, aborted: false };
  calls.push(call);
  if (method === "tools/list") return { result: { tools: TOOLS } };
  if (method !== "tools/call") throw new McpProtocolError(-32601, `Method not found: ${method}`);
  const { a, b } = params.arguments ?? {};
  switch (params.name) {
    case "add":
      await notify("notifications/progress", { progressToken: "add", progress: 1, total: 2 });
      await notify("notifications/progress", { progressToken: "add", progress: 2, total: 2 });
      return { result: { content: [{ type: "text", text: String(a + b) }], structuredContent: { sum: a + b } } };
    case "divide":
      if (b === 0) throw new McpProtocolError(-32602, "division by zero", { b });
      return { result: { content: [{ type: "text", text: String(a / b) }] } };
    case "wait":
      return new Promise((_, reject) => {
        signal.addEventListener(
          "abort",
          () => {
            call.aborted = true;
            reject(signal.reason);
          },
          { once: true },
        );
      });
    default:
      throw new McpProtocolError(-32602, `Unknown tool: ${params.name}`);
  }
}

const provider = new McpOverAcpProvider();
const sessionsCreated = new Set();

// The provider answers a withdrawn request -32800 and a request for a disposed server -33001; both are expected.
allowClientErrors(
  (request, response) => request?.method === "mcp/message" && [-32800, -33001].includes(response.error.code),
);

const app = client({ name: "acp-agent-interop-mcp" })
  .onRequest(methods.client.mcp.message, provider.handleRequest)
  .onRequest("*", refuseRequest)
  .onNotification("session/update", updatesOnlyFor(sessionsCreated))
  .onNotification("*", refuseNotification);

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

/** The one agent message of a turn. */
function said(updates, label) {
  const texts = agentTexts(updates);
  check(texts.length === 1, `${label}: expected one agent message`, updates);
  return texts[0];
}

/** The tool call of a turn, patched together from its updates: {status, name, content texts}. */
function toolCallIn(updates) {
  let state;
  for (const update of updates) {
    if (update.sessionUpdate === "tool_call_update") {
      state = { ...(state ?? { content: [] }), ...update, content: update.content ?? state?.content ?? [] };
    } else if (update.sessionUpdate === "tool_call_content_chunk" && state) {
      state.content = [...state.content, update.content];
    }
  }
  if (!state) return null;
  return {
    name: state.name,
    status: state.status,
    rawInput: state.rawInput,
    rawOutput: state.rawOutput,
    content: state.content.map((c) => c.content?.text),
  };
}

/** `mcp/message` requests the agent sent, in order. */
const mcpRequests = () => agentMessages().filter((e) => e.message.method === "mcp/message" && "id" in e.message);

async function roundTrip(session) {
  const updates = await promptTurn(session, "add", 'add {"a": 2, "b": 3}');
  const [list, add] = calls.slice(-2);
  check(list.method === "tools/list" && add.method === "tools/call" && add.tool === "add", "add: server calls", calls);
  return { said: said(updates, "add"), toolCall: toolCallIn(updates), meta: { version: add.protocolVersion, clientInfo: add.clientInfo } };
}

async function cancelWhileWaiting(ctx, session) {
  setStep("wait + session/cancel");
  const reading = readUntilStop(session);
  await session.prompt("wait {}");
  await waitFor(() => calls.some((c) => c.tool === "wait"), "the agent's wait call");
  const request = mcpRequests().at(-1);
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const updates = await reading;
  const wait = calls.find((c) => c.tool === "wait");
  await waitFor(() => wait.aborted, "the provider aborting the wait handler");
  await waitFor(() => clientAnswersTo(request.message.id).length === 1, "the provider's answer to the withdrawn request");
  const [answer] = clientAnswersTo(request.message.id);
  return {
    stopReason: updates.at(-1).stopReason,
    aborted: wait.aborted,
    withdrawals: withdrawalsOf(request.message.id).length,
    answer: answer.message.error?.code ?? null,
    toolCall: toolCallIn(updates)?.status ?? null,
  };
}

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop-mcp", version: "0.0.0" },
    capabilities: {},
  });
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${EXPECTED_AGENT_NAME}`, init);
  const mcpCapabilities = init.capabilities?.session?.mcp ?? null;

  setStep("session/new with an acp MCP server");
  const registration = provider.registerServer(ctx, { name: "calc", handler: calc });
  const session = await ctx.buildSession(process.cwd()).withMcpServer(registration.declaration).start();
  sessionsCreated.add(session.sessionId);
  check(
    isDeepStrictEqual(clientMessages().findLast((e) => e.message.method === "session/new").message.params.mcpServers, [
      registration.declaration,
    ]),
    "session/new: the SDK did not send the declaration",
  );

  const add = await roundTrip(session);
  const divide = said(await promptTurn(session, "divide", 'divide {"a": 1, "b": 0}'), "divide");
  const unknown = said(await promptTurn(session, "nope", "nope"), "nope");
  const cancelled = await cancelWhileWaiting(ctx, session);

  setStep("add after the registration was disposed");
  await registration.dispose();
  const gone = await promptTurn(session, "add after dispose", 'add {"a": 1, "b": 1}', "error");
  const error = gone.at(-1).error ?? null;

  session.dispose();
  return {
    agent: init.info,
    mcpCapabilities,
    declaration: { type: registration.declaration.type, name: registration.declaration.name },
    add,
    divide,
    unknown,
    cancelled,
    disposed: { code: error?.code ?? null, message: error?.message ?? null },
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire() {
  checkResponses({ noStrayResponses: true });
  for (const request of mcpRequests()) {
    check(clientAnswersTo(request.message.id).length === 1, "an mcp/message request did not get exactly one answer");
  }
  const inner = new Set(mcpRequests().map((e) => `${e.message.params.serverId} ${e.message.params.requestId}`));
  check(inner.size === mcpRequests().length, "an inner MCP request id was reused");
}

// ---------------------------------------------------------------------------------------------------------------

process.exit(
  await run({
    app,
    scenario,
    timeoutMs: OVERALL_TIMEOUT_MS,
    checkWire,
    tailLength: 12,
    summary: (result, exit) => ({
      ...result,
      protocolVersion: MCP_PROTOCOL_VERSION,
      mcpRequests: mcpRequests().length,
      serverCalls: calls.map((c) => `${c.method}${c.tool ? ` ${c.tool}` : ""}`),
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
