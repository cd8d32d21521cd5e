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

import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import { client, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  check,
  CheckFailed,
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
  updatesOnlyFor,
} from "./harness.mjs";

const OVERALL_TIMEOUT_MS = 30_000;
const EXPECTED_AGENT_NAME = "background-agent";
const BG_COMMAND = "sleep 30";

await setup({
  name: "background_client",
  usage: "usage: node background_client.mjs <python> <path/to/background_agent.py>",
  wireEnv: true,
});

// ---------------------------------------------------------------------------------------------------------------
// Client app: handlers for everything an agent may send, so nothing is left unhandled.

const sessionsCreated = new Set();

const app = client({ name: "acp-agent-interop-background" })
  .onRequest("session/request_permission", ({ params }) => {
    reportError(`unexpected permission request: ${show(params)}`);
    return { outcome: { outcome: "cancelled" } };
  })
  .onRequest("*", refuseRequest)
  .onNotification("session/update", updatesOnlyFor(sessionsCreated))
  .onNotification("*", refuseNotification);

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

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function backgroundProcess(ctx, session) {
  setStep("/bg: start");
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

  setStep("/bg: terminal/cancel");
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
  setStep("/watch: start");
  const turn = await promptTurn(session, "/watch 30");
  const call = turn.find((update) => update.sessionUpdate === "tool_call_update" && update.title === "Watch");
  check(call, "/watch: no tool call titled Watch", turn);
  const { toolCallId } = call;
  checkBackground(session, [toolCallItem(toolCallId)], "/watch: after the turn");
  check(session.canCancelToolCall(toolCallId), "/watch: canCancelToolCall is false while it runs");

  setStep("/watch: first tick");
  const ticks = await readUntil(
    session,
    "a tick",
    (u) => u.sessionUpdate === "tool_call_content_chunk" && u.toolCallId === toolCallId,
  );
  const tick = ticks.at(-1).content;
  check(tick.type === "content" && tick.content.text === "tick 1", "/watch: unexpected first tick", tick);
  checkBackground(session, [toolCallItem(toolCallId)], "/watch: while it ticks");

  setStep("/watch: tool_call/cancel");
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
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop", version: "0.0.0" },
    capabilities: {},
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${EXPECTED_AGENT_NAME}`, init);

  setStep("session/new");
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);
  check(session.background === undefined, "a new session reports a background list before any snapshot");

  const bg = await backgroundProcess(ctx, session);
  const watch = await watcher(ctx, session);

  setStep("session/close");
  const closed = await ctx.request("session/close", { sessionId: session.sessionId });
  check(isDeepStrictEqual(closed, {}), "session/close: result is not {}", closed);
  const closeResponse = responseTo(lastClientRequest("session/close"));
  session.dispose();
  return { agent: init.info, sessionId: session.sessionId, bg, watch, close: closed, closeSeq: closeResponse.seq };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire(result) {
  checkResponses();
  const late = agentMessages().filter(
    (entry) => entry.seq > result.closeSeq && entry.message.params?.sessionId === result.sessionId,
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
    tailLength: 10,
    summary: (result, exit) => ({
      agent: result.agent,
      bg: result.bg,
      watch: result.watch,
      close: result.close,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
