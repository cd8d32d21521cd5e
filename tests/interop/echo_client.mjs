#!/usr/bin/env node
// Drives examples/echo_agent.py with the official ACP TypeScript SDK (experimental v2 client API).
//
//   node tests/interop/echo_client.mjs <python> <path/to/examples/echo_agent.py>
//
// Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr on any failed check,
// any error the SDK reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin

import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import { client, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  check,
  checkResponses,
  clientMessages,
  describeError,
  lastClientRequest,
  refuseNotification,
  refuseRequest,
  reportError,
  responseTo,
  run,
  setStep,
  setup,
  show,
} from "./harness.mjs";

const OVERALL_TIMEOUT_MS = 20_000;
const EXPECTED_AGENT_NAME = "echo-agent";
const FIRST_PROMPT = "hello interop";
// Long enough that a session/cancel sent right after it can land while the reply is still streaming.
const CANCEL_PROMPT = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ");
const AFTER_CANCEL_PROMPT = "still here after cancel";

await setup({
  name: "echo_client",
  usage: "usage: node echo_client.mjs <python> <path/to/echo_agent.py>",
  detailedLineErrors: true,
  describeZodErrors: true,
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
  .onRequest("*", refuseRequest)
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
  .onNotification("*", refuseNotification);

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
  setStep(label);
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
  setStep(label);
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

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop", title: "acp-agent interop test client", version: "0.0.0" },
    capabilities: {},
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${show(EXPECTED_AGENT_NAME)}`, init);
  check(typeof init.info?.version === "string", "initialize: info.version missing", init);
  check(init.capabilities?.session != null, "initialize: capabilities.session missing (no session methods)", init);

  setStep("session/new");
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);
  check(typeof session.sessionId === "string" && session.sessionId !== "", "session/new: bad sessionId", session.sessionId);

  const first = await promptTurn(session, "first prompt", FIRST_PROMPT);

  // session/cancel right behind a prompt (written before the prompt is answered), then session/cancel once the
  // prompt was inserted. The echo agent is fast, so each turn may end either way.
  const cancelBehind = await cancelTurn(ctx, session, "prompt + immediate session/cancel", false);
  const cancelAfterInsert = await cancelTurn(ctx, session, "prompt, inserted + session/cancel", true);

  const afterCancel = await promptTurn(session, "prompt after cancel", AFTER_CANCEL_PROMPT);

  setStep("session/close");
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
  checkResponses({ noStrayResponses: true });
  // Nothing more for the session after the session/close response (R45).
  const late = agentMessages().filter(
    (entry) => entry.seq > result.closeResponseSeq && entry.message.params?.sessionId === result.sessionId,
  );
  check(late.length === 0, "agent sent messages for the session after the session/close response", late);
}

// ---------------------------------------------------------------------------------------------------------------

process.exit(
  await run({
    app,
    scenario,
    timeoutMs: OVERALL_TIMEOUT_MS,
    checkWire,
    tailLength: 8,
    summary: (result, exit) => ({
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
    }),
  }),
);
