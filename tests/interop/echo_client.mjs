#!/usr/bin/env node
// Drives examples/echo_agent.py with the official ACP TypeScript SDK (experimental v2 client API).
//
//   node tests/interop/echo_client.mjs <python> <path/to/examples/echo_agent.py>
//
// Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr on any failed check,
// any error the SDK reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin

import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import process from "node:process";
import { format, isDeepStrictEqual } from "node:util";

import { client, ndJsonStream, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

const OVERALL_TIMEOUT_MS = 20_000;
const EXIT_TIMEOUT_MS = 5_000;
const EXPECTED_AGENT_NAME = "echo-agent";
const FIRST_PROMPT = "hello interop";
// Long enough that a session/cancel sent right after it can land while the reply is still streaming.
const CANCEL_PROMPT = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ");
const AFTER_CANCEL_PROMPT = "still here after cancel";

// The SDK's own validator for session/update params (the SDK logs a failure without naming the message; this
// lets the failure report show the offending line). Same module instance the SDK uses; the version is pinned.
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
  if (error instanceof Error && error.name === "ZodError" && Array.isArray(error.issues)) {
    return `the SDK rejected the agent's answer as invalid: ${show(error.issues)}`;
  }
  if (error instanceof Error) {
    return `${error.name}: ${error.message}${error.issues ? ` issues=${show(error.issues)}` : ""}`;
  }
  return show(error);
}

// The SDK reports problems it cannot turn into a rejected promise -- incoming notifications whose params fail
// validation ("Error handling notification"), messages that are not JSON-RPC ("Invalid message"), responses to
// unknown request ids -- only through console.error / console.warn. Make every such report fatal.
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
if (transcriptPath) writeFileSync(transcriptPath, "");
if (clientTranscriptPath) writeFileSync(clientTranscriptPath, "");

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
  if (unterminated) {
    reportError(`agent stdout ended with an unterminated line: ${show(line)}`);
  }
  if (line.trim() === "") {
    reportError("agent wrote an empty line to stdout");
    return;
  }
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    reportError(`agent wrote a line to stdout that is not JSON: ${show(line)}`);
    return;
  }
  if (typeof message !== "object" || message === null || Array.isArray(message)) {
    reportError(`agent wrote a JSON value that is not a single JSON-RPC object: ${show(line)}`);
    return;
  }
  if (message.jsonrpc !== "2.0") {
    reportError(`agent message without "jsonrpc": "2.0": ${show(line)}`);
  }
  wire.push({ seq: seq++, from: "agent", message });
  if (message.method === "session/update" && !("id" in message)) {
    const parsed = zUpdateSessionNotification.safeParse(message.params);
    if (!parsed.success) {
      reportError(`the SDK cannot parse this session/update: ${show(line)}; issues: ${show(parsed.error.issues)}`);
    }
  }
}

function recordClientLine(line) {
  const message = JSON.parse(line);
  wire.push({ seq: seq++, from: "client", message });
  // The client SDK answers an agent message it cannot accept (invalid JSON, not JSON-RPC, a request whose params
  // fail validation, an unknown method, a throwing handler) with a JSON-RPC error. None is expected here.
  if ("error" in message && !("method" in message)) {
    reportError(`the client SDK rejected a message from the agent and answered: ${show(message)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Agent process and stdio streams.

const [, , python, agentScript] = process.argv;
if (!python || !agentScript) {
  process.stderr.write("usage: node echo_client.mjs <python> <path/to/echo_agent.py>\n");
  process.exit(2);
}

const child = spawn(python, [agentScript], { stdio: ["pipe", "pipe", "inherit"] });
let agentExit; // {code, signal} once the process has exited and its stdio closed
let expectingExit = false;
const agentClosed = new Promise((resolve) => {
  child.on("close", (code, signal) => {
    agentExit = { code, signal };
    if (!expectingExit) {
      reportError(`agent process exited unexpectedly (code ${code}, signal ${signal})`);
    }
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
    // The SDK connection closed; keep draining and logging stdout, but stop feeding the SDK.
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
const counters = { permissionRequests: 0, elicitations: 0, sessionUpdates: 0 };

const app = client({ name: "acp-agent-interop" })
  .onRequest("session/request_permission", ({ params }) => {
    counters.permissionRequests += 1;
    check(sessionsCreated.has(params.sessionId), "session/request_permission for an unknown session", params);
    return { outcome: { outcome: "cancelled" } };
  })
  .onRequest("elicitation/create", () => {
    counters.elicitations += 1;
    return { action: "cancel" };
  })
  .onRequest("*", ({ method, params }) => {
    reportError(`unexpected request from the agent: ${method} ${show(params)}`);
    throw RequestError.methodNotFound(method);
  })
  .onNotification("session/update", ({ params }) => {
    counters.sessionUpdates += 1;
    if (!sessionsCreated.has(params.sessionId)) {
      reportError(`session/update for a session this client never created: ${show(params)}`);
    }
  })
  .onNotification("elicitation/complete", ({ params }) => {
    reportError(`unexpected elicitation/complete (no elicitation was accepted): ${show(params)}`);
  })
  .onNotification("auth/status_update", ({ params }) => {
    reportError(`unexpected auth/status_update (auth.status was not negotiated): ${show(params)}`);
  })
  .onNotification("*", ({ method, params }) => {
    reportError(`unexpected notification from the agent: ${method} ${show(params)}`);
  });

// ---------------------------------------------------------------------------------------------------------------
// Scenario helpers.

function settle(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

function textOf(blocks) {
  return blocks
    .filter((block) => block && block.type === "text")
    .map((block) => block.text)
    .join("");
}

/** Reads session messages until an idle snapshot with a stop reason; repeated idles without one are skipped. */
async function readUntilStop(session, allowedStopReasons, signal, updates = []) {
  for (;;) {
    const message = await session.nextUpdate(signal);
    if (message.kind === "stop") {
      if (message.stopReason == null) {
        updates.push(message.update);
        continue;
      }
      check(
        allowedStopReasons.includes(message.stopReason),
        `idle state_update with stopReason ${show(message.stopReason)}, expected one of ${show(allowedStopReasons)}`,
        message.update,
      );
      return { updates, stop: message.update, stopReason: message.stopReason };
    }
    updates.push(message.update);
  }
}

/** Applies message updates with ACP patch semantics: full updates replace the content, chunks append. */
function collectMessages(updates, fullKind, chunkKind) {
  const messages = new Map(); // messageId -> {blocks, chunks}
  const entry = (messageId) => {
    if (!messages.has(messageId)) messages.set(messageId, { blocks: [], chunks: 0 });
    return messages.get(messageId);
  };
  for (const update of updates) {
    if (update.sessionUpdate === fullKind) {
      const message = entry(update.messageId);
      if (update.content !== undefined) message.blocks = [...(update.content ?? [])];
    } else if (update.sessionUpdate === chunkKind) {
      const message = entry(update.messageId);
      message.blocks.push(update.content);
      message.chunks += 1;
    }
  }
  return messages;
}

/**
 * Checks one prompt turn: the user-message echo carries the prompt response's messageId and text, `running` was
 * reported before the idle, and the agent streamed one message whose text is the prompt (or a prefix of it when
 * the turn was cancelled).
 */
function checkTurn(label, promptText, promptMessageId, turn) {
  const { updates, stopReason } = turn;
  check(
    updates.some((update) => update.sessionUpdate === "state_update" && update.state === "running"),
    `${label}: no running state_update before the idle one`,
    updates,
  );
  const userMessages = collectMessages(updates, "user_message", "user_message_chunk");
  check(
    userMessages.has(promptMessageId),
    `${label}: no user_message echo with the messageId ${show(promptMessageId)} returned by session/prompt`,
    updates,
  );
  check(
    userMessages.size === 1,
    `${label}: expected exactly one user message echo, got ids ${show([...userMessages.keys()])}`,
  );
  const echoedPrompt = textOf(userMessages.get(promptMessageId).blocks);
  check(echoedPrompt === promptText, `${label}: user_message echo text differs from the prompt`, echoedPrompt);

  const agentMessages = collectMessages(updates, "agent_message", "agent_message_chunk");
  let reply = "";
  let chunks = 0;
  if (stopReason === "end_turn" || agentMessages.size > 0) {
    check(
      agentMessages.size === 1,
      `${label}: expected one agent message (all chunks sharing one messageId), got ids ${show([...agentMessages.keys()])}`,
      updates,
    );
    const [message] = agentMessages.values();
    reply = textOf(message.blocks);
    chunks = message.chunks;
  }
  if (stopReason === "end_turn") {
    check(reply === promptText, `${label}: echoed agent text differs from the prompt`, { reply, promptText });
    check(chunks > 0, `${label}: the reply was not streamed as agent_message_chunk updates`, updates);
  } else {
    check(promptText.startsWith(reply), `${label}: cancelled reply is not a prefix of the prompt`, reply);
  }
  return {
    messageId: promptMessageId,
    stopReason,
    agentText: reply.length > 60 ? `${reply.slice(0, 60)}…` : reply,
    agentTextLength: reply.length,
    agentChunks: chunks,
    updates: updates.length,
  };
}

/** Sends a prompt and reads its turn to the end, concurrently, so neither order of response and updates stalls. */
async function promptTurn(session, label, text) {
  step = label;
  const [response, turn] = await Promise.all([session.prompt(text), readUntilStop(session, ["end_turn"])]);
  check(typeof response.messageId === "string" && response.messageId !== "", `${label}: bad prompt response`, response);
  return checkTurn(label, text, response.messageId, turn);
}

/**
 * Sends a prompt and session/cancel for it -- right behind the prompt, or once the prompt response says it was
 * inserted -- and checks the outcome: an inserted prompt ends with an idle end_turn or cancelled (and a reply that
 * is a prefix of the prompt); a prompt refused with -32800 was never inserted, so it must not be echoed, and if
 * work did start the session must still go idle.
 */
async function cancelTurn(ctx, session, label, afterInsertion) {
  step = label;
  const reading = new AbortController();
  const updates = [];
  const turnRead = settle(readUntilStop(session, ["end_turn", "cancelled"], reading.signal, updates));
  const prompt = settle(session.prompt(CANCEL_PROMPT));
  if (afterInsertion) await prompt;
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const promptLine = lastClientRequest("session/prompt");
  const cancelLine = clientMessages().findLast((entry) => entry.message.method === "session/cancel");
  check(promptLine.seq < cancelLine.seq, `${label}: session/cancel was written before the prompt`);

  const outcome = await prompt;
  if (outcome.ok) {
    const turn = await turnRead;
    if (!turn.ok) throw turn.error;
    return { prompt: "inserted", ...checkTurn(label, CANCEL_PROMPT, outcome.value.messageId, turn.value) };
  }
  check(
    !afterInsertion && outcome.error instanceof RequestError && outcome.error.code === -32800,
    `${label}: session/prompt failed`,
    describeError(outcome.error),
  );
  const grace = setTimeout(() => reading.abort(new Error("no idle state_update")), 1000);
  const turn = await turnRead;
  clearTimeout(grace);
  check(
    !updates.some((update) => update.sessionUpdate?.startsWith("user_message")),
    `${label}: prompt refused with -32800 but echoed as a user message`,
    updates,
  );
  const started = updates.some((update) => update.sessionUpdate === "state_update" && update.state === "running");
  check(turn.ok || !started, `${label}: work started for the refused prompt but the session never went idle`, updates);
  return { prompt: "refused -32800", stopReason: turn.ok ? turn.value.stopReason : null, updates: updates.length };
}

function lastClientRequest(method) {
  const entries = clientMessages().filter((entry) => entry.message.method === method && "id" in entry.message);
  return entries.at(-1);
}

function responseTo(request) {
  return agentMessages().find(
    (entry) => !("method" in entry.message) && isDeepStrictEqual(entry.message.id, request.message.id),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function scenario(ctx) {
  step = "initialize";
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop", title: "acp-agent interop test client", version: "0.0.0" },
    capabilities: {},
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${show(EXPECTED_AGENT_NAME)}`, init);
  check(typeof init.info?.version === "string", "initialize: info.version missing", init);
  check(init.capabilities?.session != null, "initialize: capabilities.session missing (no session methods)", init);

  step = "session/new";
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);
  check(typeof session.sessionId === "string" && session.sessionId !== "", "session/new: bad sessionId", session.sessionId);

  const first = await promptTurn(session, "first prompt", FIRST_PROMPT);

  // session/cancel right behind a prompt (written before the prompt is answered), then session/cancel once the
  // prompt was inserted. The echo agent is fast, so each turn may end either way.
  const cancelBehind = await cancelTurn(ctx, session, "prompt + immediate session/cancel", false);
  const cancelAfterInsert = await cancelTurn(ctx, session, "prompt, inserted + session/cancel", true);

  const afterCancel = await promptTurn(session, "prompt after cancel", AFTER_CANCEL_PROMPT);

  step = "session/close";
  const closed = await ctx.request("session/close", { sessionId: session.sessionId });
  check(isDeepStrictEqual(closed, {}), "session/close: result is not {}", closed);
  const closeRequest = lastClientRequest("session/close");
  const closeResponse = responseTo(closeRequest);
  check(closeResponse !== undefined, "session/close: response not found on the wire");
  check(
    "result" in closeResponse.message && isDeepStrictEqual(closeResponse.message.result, {}),
    "session/close: the agent did not answer with result {}",
    closeResponse.message,
  );
  session.dispose();

  return {
    agent: init.info,
    sessionId: session.sessionId,
    first,
    cancel: cancelBehind,
    cancelAfterInsert,
    afterCancel,
    close: closeResponse.message.result,
    closeResponseSeq: closeResponse.seq,
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire(result) {
  // Every client request got exactly one response (R8) and every agent response answers a client request.
  const requests = clientMessages().filter((entry) => "method" in entry.message && "id" in entry.message);
  const responses = agentMessages().filter((entry) => !("method" in entry.message));
  for (const request of requests) {
    const answers = responses.filter((entry) => isDeepStrictEqual(entry.message.id, request.message.id));
    check(answers.length === 1, `request ${request.message.method} got ${answers.length} responses`, request.message);
  }
  for (const response of responses) {
    check(
      requests.some((entry) => isDeepStrictEqual(entry.message.id, response.message.id)),
      "response to a request the client never sent",
      response.message,
    );
  }
  // Nothing more for the session after the session/close response (R45).
  const late = agentMessages().filter(
    (entry) => entry.seq > result.closeResponseSeq && entry.message.params?.sessionId === result.sessionId,
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
      protocolVersion: 2,
      agent: result.agent,
      first: result.first,
      cancel: result.cancel,
      cancelAfterInsert: result.cancelAfterInsert,
      afterCancel: result.afterCancel,
      close: result.close,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
      ...counters,
    };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  } catch (error) {
    let message = error instanceof CheckFailed ? error.message : describeError(error);
    if (!message.startsWith("[step: ")) message = `[step: ${step}] ${message}`;
    process.stderr.write(`echo_client: FAILED: ${message}\n`);
    for (const extra of errors.filter((text) => text !== message)) {
      process.stderr.write(`echo_client: also: ${extra}\n`);
    }
    const tail = wire.slice(-8).map((entry) => `  ${entry.from}: ${show(entry.message)}`);
    if (tail.length > 0) process.stderr.write(`echo_client: last messages on the wire:\n${tail.join("\n")}\n`);
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
