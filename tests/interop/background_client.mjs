#!/usr/bin/env node
// Drives examples/background_agent.py with the official ACP TypeScript SDK (experimental v2 client API) and checks
// that the SDK's `ActiveSession` view of background work -- `background`, `canCancelTerminal`, `canCancelToolCall`
// -- agrees with what the agent did at each step, and that `cancelTerminal` / `cancelToolCall` work.
//
//   node tests/interop/background_client.mjs <python> <path/to/examples/background_agent.py>
//
// Scenario: `/bg sleep 30`, then `session.cancelTerminal(id)`; `/watch 30`, then `session.cancelToolCall(id)`;
// then `session/close`. Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr on
// any failed check, any error the SDK reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin
//   ACP_INTEROP_WIRE               file that receives both directions as JSON lines {"from", "message"}, in the
//                                  order the client saw them (for a wire-rule checker)

import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import process from "node:process";
import { format, isDeepStrictEqual } from "node:util";

import { client, ndJsonStream, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

const OVERALL_TIMEOUT_MS = 30_000;
const EXIT_TIMEOUT_MS = 5_000;
const EXPECTED_AGENT_NAME = "background-agent";
const BG_COMMAND = "sleep 30";

const { zUpdateSessionNotification } = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v2/unstable/schema/zod.gen.js", import.meta.url).href
);
const SDK_VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

// ---------------------------------------------------------------------------------------------------------------
// Failure handling: everything funnels into `reportError`, which makes the run fail.

class CheckFailed extends Error {
  name = "CheckFailed";
}

const errors = [];
let rejectFatal;
const fatal = new Promise((_, reject) => {
  rejectFatal = reject;
});
fatal.catch(() => {});
let step = "starting";

function reportError(message) {
  const full = `[step: ${step}] ${message}`;
  errors.push(full);
  rejectFatal(new CheckFailed(full));
}

function check(condition, message, details) {
  if (!condition) {
    throw new CheckFailed(details === undefined ? message : `${message}: ${show(details)}`);
  }
}

function show(value) {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(value);
  }
}

function describeError(error) {
  if (error instanceof RequestError) {
    return `RequestError ${error.code} ${error.message}${error.data === undefined ? "" : ` data=${show(error.data)}`}`;
  }
  if (error instanceof Error) {
    return `${error.name}: ${error.message}${error.issues ? ` issues=${show(error.issues)}` : ""}`;
  }
  return show(error);
}

// The SDK reports problems it cannot turn into a rejected promise only through console.*: make them fatal.
for (const level of ["error", "warn", "log", "info", "debug"]) {
  console[level] = (...args) => reportError(`SDK reported via console.${level}: ${format(...args)}`);
}
process.on("unhandledRejection", (reason) => reportError(`unhandled promise rejection: ${describeError(reason)}`));
process.on("uncaughtException", (error) => reportError(`uncaught exception: ${describeError(error)}`));

// ---------------------------------------------------------------------------------------------------------------
// Wire log: every message in both directions, in the order they crossed the pipe.

let seq = 0;
const wire = []; // {seq, from: "agent" | "client", message}
const agentMessages = () => wire.filter((entry) => entry.from === "agent");
const clientMessages = () => wire.filter((entry) => entry.from === "client");

const transcriptPath = process.env.ACP_INTEROP_TRANSCRIPT;
const clientTranscriptPath = process.env.ACP_INTEROP_CLIENT_TRANSCRIPT;
const wirePath = process.env.ACP_INTEROP_WIRE;
for (const path of [transcriptPath, clientTranscriptPath, wirePath]) {
  if (path) writeFileSync(path, "");
}

function logWire(from, message) {
  wire.push({ seq: seq++, from, message });
  if (wirePath) appendFileSync(wirePath, `${JSON.stringify({ from, message })}\n`);
}

function lineSplitter(onLine) {
  let pending = Buffer.alloc(0);
  return {
    push(chunk) {
      pending = Buffer.concat([pending, chunk]);
      let index;
      while ((index = pending.indexOf(0x0a)) !== -1) {
        onLine(pending.subarray(0, index).toString("utf8"));
        pending = pending.subarray(index + 1);
      }
    },
    flush() {
      if (pending.length > 0) {
        onLine(pending.toString("utf8"), true);
        pending = Buffer.alloc(0);
      }
    },
  };
}

function recordAgentLine(line, unterminated = false) {
  if (unterminated) reportError(`agent stdout ended with an unterminated line: ${show(line)}`);
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    reportError(`agent wrote a line to stdout that is not JSON: ${show(line)}`);
    return;
  }
  if (typeof message !== "object" || message === null || Array.isArray(message) || message.jsonrpc !== "2.0") {
    reportError(`agent wrote something that is not a single JSON-RPC 2.0 object: ${show(line)}`);
    return;
  }
  logWire("agent", message);
  if (message.method === "session/update" && !("id" in message)) {
    const parsed = zUpdateSessionNotification.safeParse(message.params);
    if (!parsed.success) {
      reportError(`the SDK cannot parse this session/update: ${show(line)}; issues: ${show(parsed.error.issues)}`);
    }
  }
}

function recordClientLine(line) {
  const message = JSON.parse(line);
  logWire("client", message);
  if ("error" in message && !("method" in message)) {
    reportError(`the client SDK rejected a message from the agent and answered: ${show(message)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Agent process and stdio streams.

const [, , python, agentScript] = process.argv;
if (!python || !agentScript) {
  process.stderr.write("usage: node background_client.mjs <python> <path/to/background_agent.py>\n");
  process.exit(2);
}

const child = spawn(python, [agentScript], { stdio: ["pipe", "pipe", "inherit"] });
let agentExit;
let expectingExit = false;
const agentClosed = new Promise((resolve) => {
  child.on("close", (code, signal) => {
    agentExit = { code, signal };
    if (!expectingExit) reportError(`agent process exited unexpectedly (code ${code}, signal ${signal})`);
    resolve(agentExit);
  });
});
child.on("error", (error) => reportError(`agent process error: ${describeError(error)}`));
child.stdin.on("error", (error) => reportError(`writing to the agent's stdin failed: ${describeError(error)}`));

const agentLines = lineSplitter(recordAgentLine);
let inputController;
let inputOpen = true;
const input = new ReadableStream({
  start(controller) {
    inputController = controller;
  },
  cancel() {
    inputOpen = false;
  },
});
child.stdout.on("data", (chunk) => {
  if (transcriptPath) appendFileSync(transcriptPath, chunk);
  agentLines.push(chunk);
  if (inputOpen) inputController.enqueue(new Uint8Array(chunk));
});
child.stdout.on("end", () => {
  agentLines.flush();
  if (inputOpen) {
    inputOpen = false;
    inputController.close();
  }
});

const clientLines = lineSplitter(recordClientLine);
const output = new WritableStream({
  write(bytes) {
    const buffer = Buffer.from(bytes);
    if (clientTranscriptPath) appendFileSync(clientTranscriptPath, buffer);
    clientLines.push(buffer);
    return new Promise((resolve, reject) => {
      child.stdin.write(buffer, (error) => (error ? reject(error) : resolve()));
    });
  },
});

// ---------------------------------------------------------------------------------------------------------------
// Client app: handlers for everything an agent may send, so nothing is left unhandled.

const sessionsCreated = new Set();

const app = client({ name: "acp-agent-interop-background" })
  .onRequest("session/request_permission", ({ params }) => {
    reportError(`unexpected permission request: ${show(params)}`);
    return { outcome: { outcome: "cancelled" } };
  })
  .onRequest("*", ({ method, params }) => {
    reportError(`unexpected request from the agent: ${method} ${show(params)}`);
    throw RequestError.methodNotFound(method);
  })
  .onNotification("session/update", ({ params }) => {
    if (!sessionsCreated.has(params.sessionId)) {
      reportError(`session/update for a session this client never created: ${show(params)}`);
    }
  })
  .onNotification("*", ({ method, params }) => {
    reportError(`unexpected notification from the agent: ${method} ${show(params)}`);
  });

// ---------------------------------------------------------------------------------------------------------------
// Scenario helpers.

const terminalItem = (terminalId) => ({ type: "terminal", terminalId });
const toolCallItem = (toolCallId) => ({ type: "tool_call", toolCallId });

/** Reads session updates until `done(update)` holds; returns every update read, the matching one last. */
async function readUntil(session, what, done) {
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    updates.push(message.update);
    if (done(message.update, message)) return updates;
  }
}

/** Sends a prompt and reads its turn up to the idle snapshot carrying a stop reason (which must be end_turn). */
async function promptTurn(session, text) {
  const [response, updates] = await Promise.all([
    session.prompt(text),
    readUntil(session, "idle end_turn", (_, message) => message.kind === "stop" && message.stopReason != null),
  ]);
  const stop = updates.at(-1);
  check(stop.stopReason === "end_turn", `${text}: the turn did not end with end_turn`, stop);
  check(typeof response.messageId === "string", `${text}: bad prompt response`, response);
  return updates;
}

/** The background list a client rebuilds from the snapshots it read (the latest one wins). */
function lastListIn(updates) {
  const snapshots = updates.filter((update) => update.sessionUpdate === "state_update");
  return snapshots.length ? snapshots.at(-1).background : undefined;
}

function checkBackground(session, expected, label) {
  check(isDeepStrictEqual(session.background, expected), `${label}: session.background`, {
    sdk: session.background,
    expected,
  });
}

async function rejectsWith(promise, code, label) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof RequestError && error.code === code, `${label}: expected error ${code}`, describeError(error));
    return error.code;
  }
  throw new CheckFailed(`${label}: the agent accepted it, expected error ${code}`);
}

async function rejectsLocally(promise, label) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof TypeError, `${label}: expected the SDK to refuse it locally`, describeError(error));
    return error.message;
  }
  throw new CheckFailed(`${label}: the SDK sent a cancel for an item that does not advertise cancel`);
}

function lastClientRequest(method) {
  return clientMessages().filter((entry) => entry.message.method === method && "id" in entry.message).at(-1);
}

function responseTo(request) {
  return agentMessages().find(
    (entry) => !("method" in entry.message) && isDeepStrictEqual(entry.message.id, request.message.id),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function backgroundProcess(ctx, session) {
  step = "/bg: start";
  const turn = await promptTurn(session, `/bg ${BG_COMMAND}`);
  const call = turn.find((update) => update.sessionUpdate === "tool_call_update" && update.title === BG_COMMAND);
  const terminal = turn.find((update) => update.sessionUpdate === "terminal_update" && "command" in update);
  check(call && call.kind === "execute", "/bg: no execute tool call titled with the command", turn);
  check(terminal && terminal.command === BG_COMMAND, "/bg: no terminal running the command", turn);
  const { toolCallId } = call;
  const { terminalId } = terminal;
  check(
    turn.some((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === toolCallId && u.status === "completed"),
    "/bg: the tool call did not complete at hand-off",
    turn,
  );
  checkBackground(session, [terminalItem(terminalId)], "/bg: after the turn");
  check(isDeepStrictEqual(lastListIn(turn), session.background), "/bg: SDK list differs from the last snapshot");
  check(session.canCancelTerminal(terminalId), "/bg: canCancelTerminal is false while the process runs");
  check(!session.canCancelToolCall(toolCallId), "/bg: canCancelToolCall is true for the completed tool call");
  const refusedLocally = await rejectsLocally(session.cancelToolCall(toolCallId), "/bg: cancelToolCall(completed)");

  step = "/bg: terminal/cancel";
  const cancelled = await session.cancelTerminal(terminalId);
  check(isDeepStrictEqual(cancelled, {}), "terminal/cancel: result is not {}", cancelled);
  const exitUpdates = await readUntil(
    session,
    "exitStatus",
    (u) => u.sessionUpdate === "terminal_update" && u.terminalId === terminalId && u.exitStatus != null,
  );
  const exit = exitUpdates.at(-1);
  check(typeof exit.exitStatus.signal === "string", "terminal/cancel: exitStatus without a signal", exit);
  check(!session.canCancelTerminal(terminalId), "terminal/cancel: cancel still advertised after the exit");
  const afterExit = await readUntil(
    session,
    "the snapshot without the terminal",
    (u) => u.sessionUpdate === "state_update" && !u.background?.some((item) => item.terminalId === terminalId),
  );
  const removal = afterExit.at(-1);
  check(removal.state === "idle" && removal.stopReason == null, "terminal/cancel: changed the foreground", removal);
  checkBackground(session, [], "/bg: after the exit");
  check(
    ![...exitUpdates, ...afterExit].some((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === toolCallId),
    "terminal/cancel: the referencing tool call changed",
    [...exitUpdates, ...afterExit],
  );
  const refusedAfterExit = await rejectsLocally(session.cancelTerminal(terminalId), "/bg: cancelTerminal(exited)");
  // The SDK would not send it any more; a client that does gets -32602 (R104), never -32601.
  const rawAfterExit = await rejectsWith(
    ctx.request("terminal/cancel", { sessionId: session.sessionId, terminalId }),
    -32602,
    "terminal/cancel of an exited terminal",
  );
  return {
    toolCallId,
    terminalId,
    cancelResult: cancelled,
    exitStatus: exit.exitStatus,
    backgroundAfterExit: session.background,
    refusedLocally: [refusedLocally, refusedAfterExit],
    rawCancelAfterExit: rawAfterExit,
  };
}

async function watcher(ctx, session) {
  step = "/watch: start";
  const turn = await promptTurn(session, "/watch 30");
  const call = turn.find((update) => update.sessionUpdate === "tool_call_update" && update.title === "Watch");
  check(call, "/watch: no tool call titled Watch", turn);
  const { toolCallId } = call;
  checkBackground(session, [toolCallItem(toolCallId)], "/watch: after the turn");
  check(session.canCancelToolCall(toolCallId), "/watch: canCancelToolCall is false while it runs");

  step = "/watch: first tick";
  const ticks = await readUntil(
    session,
    "a tick",
    (u) => u.sessionUpdate === "tool_call_content_chunk" && u.toolCallId === toolCallId,
  );
  const tick = ticks.at(-1).content;
  check(tick.type === "content" && tick.content.text === "tick 1", "/watch: unexpected first tick", tick);
  checkBackground(session, [toolCallItem(toolCallId)], "/watch: while it ticks");

  step = "/watch: tool_call/cancel";
  const cancelled = await session.cancelToolCall(toolCallId);
  check(isDeepStrictEqual(cancelled, {}), "tool_call/cancel: result is not {}", cancelled);
  const finalUpdates = await readUntil(
    session,
    "a final status",
    (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === toolCallId && u.status != null,
  );
  const final = finalUpdates.at(-1);
  check(final.status === "cancelled", "tool_call/cancel: the final status is not cancelled", final);
  check(!session.canCancelToolCall(toolCallId), "tool_call/cancel: cancel still advertised after the end");
  let removal = [...finalUpdates].reverse().find((u) => u.sessionUpdate === "state_update");
  if (!removal || removal.background?.some((item) => item.toolCallId === toolCallId)) {
    const more = await readUntil(
      session,
      "the snapshot without the tool call",
      (u) => u.sessionUpdate === "state_update" && !u.background?.some((item) => item.toolCallId === toolCallId),
    );
    removal = more.at(-1);
  }
  check(removal.state === "idle" && removal.stopReason == null, "tool_call/cancel: changed the foreground", removal);
  checkBackground(session, [], "/watch: after the cancel");
  const refusedLocally = await rejectsLocally(session.cancelToolCall(toolCallId), "/watch: cancelToolCall(final)");
  const rawAfterEnd = await rejectsWith(
    ctx.request("tool_call/cancel", { sessionId: session.sessionId, toolCallId }),
    -32602,
    "tool_call/cancel of a cancelled tool call",
  );
  return {
    toolCallId,
    firstTick: tick.content.text,
    cancelResult: cancelled,
    finalStatus: final.status,
    backgroundAfterCancel: session.background,
    refusedLocally,
    rawCancelAfterEnd: rawAfterEnd,
  };
}

async function scenario(ctx) {
  step = "initialize";
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop", version: "0.0.0" },
    capabilities: {},
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${EXPECTED_AGENT_NAME}`, init);

  step = "session/new";
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);
  check(session.background === undefined, "a new session reports a background list before any snapshot");

  const bg = await backgroundProcess(ctx, session);
  const watch = await watcher(ctx, session);

  step = "session/close";
  const closed = await ctx.request("session/close", { sessionId: session.sessionId });
  check(isDeepStrictEqual(closed, {}), "session/close: result is not {}", closed);
  const closeResponse = responseTo(lastClientRequest("session/close"));
  session.dispose();
  return { agent: init.info, sessionId: session.sessionId, bg, watch, close: closed, closeSeq: closeResponse.seq };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire(result) {
  const requests = clientMessages().filter((entry) => "method" in entry.message && "id" in entry.message);
  const responses = agentMessages().filter((entry) => !("method" in entry.message));
  for (const request of requests) {
    const answers = responses.filter((entry) => isDeepStrictEqual(entry.message.id, request.message.id));
    check(answers.length === 1, `request ${request.message.method} got ${answers.length} responses`, request.message);
  }
  const late = agentMessages().filter(
    (entry) => entry.seq > result.closeSeq && entry.message.params?.sessionId === result.sessionId,
  );
  check(late.length === 0, "agent sent messages for the session after the session/close response", late);
}

// ---------------------------------------------------------------------------------------------------------------

async function main() {
  const timer = setTimeout(() => reportError(`timed out after ${OVERALL_TIMEOUT_MS / 1000} s`), OVERALL_TIMEOUT_MS);
  try {
    const result = await Promise.race([app.connectWith(ndJsonStream(output, input), scenario), fatal]);

    step = "agent shutdown";
    expectingExit = true;
    child.stdin.end();
    const exitTimer = setTimeout(
      () => reportError(`agent did not exit within ${EXIT_TIMEOUT_MS / 1000} s after stdin was closed`),
      EXIT_TIMEOUT_MS,
    );
    const exit = await Promise.race([agentClosed, fatal]);
    clearTimeout(exitTimer);
    check(exit.code === 0 && exit.signal === null, "agent did not exit with code 0", exit);

    step = "wire checks";
    checkWire(result);
    if (errors.length > 0) throw new CheckFailed(errors[0]);

    const summary = {
      ok: true,
      sdk: `@agentclientprotocol/sdk@${SDK_VERSION}`,
      agent: result.agent,
      bg: result.bg,
      watch: result.watch,
      close: result.close,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  } catch (error) {
    let message = error instanceof CheckFailed ? error.message : describeError(error);
    if (!message.startsWith("[step: ")) message = `[step: ${step}] ${message}`;
    process.stderr.write(`background_client: FAILED: ${message}\n`);
    for (const extra of errors.filter((text) => text !== message)) {
      process.stderr.write(`background_client: also: ${extra}\n`);
    }
    const tail = wire.slice(-10).map((entry) => `  ${entry.from}: ${show(entry.message)}`);
    if (tail.length > 0) process.stderr.write(`background_client: last messages on the wire:\n${tail.join("\n")}\n`);
    return 1;
  } finally {
    clearTimeout(timer);
    if (agentExit === undefined) {
      expectingExit = true;
      child.kill("SIGKILL");
    }
  }
}

process.exit(await main());
