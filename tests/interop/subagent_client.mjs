#!/usr/bin/env node
// Drives examples/background_agent.py with the official ACP TypeScript SDK (experimental v2 client API) through its
// permission and subagent rows, and checks that the SDK's `ActiveSession` view agrees with what the agent did:
// `session.isForBackgroundWork(request)` for permission requests, and `session.background` for a child session.
//
//   node tests/interop/subagent_client.mjs <python> <path/to/examples/background_agent.py>
//
// Scenario: `/bgask` (its request must be for background work), `session/cancel` (the request must stay open: no
// `$/cancel_request`), then the answer `allow-once` (the tool call shows "allowed" and leaves the list); `/ask`
// (its request must not be for background work; answered `allow-once`); `/subagent 1 ...` (the child must be in
// `session.background` as a subagent item while it runs, and leave after its idle); then `session/close`.
// Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr on any failed check, any
// error the SDK reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin
//   ACP_INTEROP_WIRE               file that receives both directions as JSON lines {"from", "message"}, in the
//                                  order the client saw them (for a wire-rule checker)

import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";

import { client } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  check,
  checkResponses,
  clientMessages,
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

const OVERALL_TIMEOUT_MS = 30_000;
const EXPECTED_AGENT_NAME = "background-agent";
const SUBAGENT_TEXT = "hello from the child";
const OPTIONS = [
  { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
  { optionId: "reject-once", name: "Reject", kind: "reject_once" },
];

await setup({
  name: "subagent_client",
  usage: "usage: node subagent_client.mjs <python> <path/to/background_agent.py>",
  wireEnv: true,
});

// ---------------------------------------------------------------------------------------------------------------
// Client app: handlers for everything an agent may send, so nothing is left unhandled.

const sessionsCreated = new Set();
const activeSessions = new Map(); // sessionId -> ActiveSession
const childrenOf = new Map(); // child sessionId -> parent sessionId, from the announcing subagent_update
const childUpdates = new Map(); // child sessionId -> its own updates, in arrival order
const permissionRequests = []; // every permission request, in arrival order
let permissionArrived = () => {};

function nextPermission(after) {
  return new Promise((resolve) => {
    const poll = () => {
      if (permissionRequests.length > after) resolve(permissionRequests[after]);
      else permissionArrived = poll;
    };
    poll();
  });
}

const app = client({ name: "acp-agent-interop-subagents" })
  .onRequest("session/request_permission", ({ params, signal, requestId }) => {
    const session = activeSessions.get(params.sessionId);
    if (!session) {
      reportError(`permission request for a session this client has no ActiveSession for: ${show(params)}`);
      return { outcome: { outcome: "cancelled" } };
    }
    return new Promise((resolve) => {
      // isForBackgroundWork as the SDK answers it when the request arrives (the decision a UI makes then)
      const entry = { params, requestId, forBackground: session.isForBackgroundWork(params), aborted: false, resolve };
      signal.addEventListener("abort", () => {
        entry.aborted = true;
        resolve({ outcome: { outcome: "cancelled" } });
      });
      permissionRequests.push(entry);
      permissionArrived();
    });
  })
  .onRequest("*", refuseRequest)
  .onNotification("session/update", ({ params }) => {
    const { sessionId, update } = params;
    if (sessionsCreated.has(sessionId)) {
      if (update.sessionUpdate === "subagent_update" && !childrenOf.has(update.sessionId)) {
        childrenOf.set(update.sessionId, sessionId);
        childUpdates.set(update.sessionId, []);
      }
    } else if (childrenOf.has(sessionId)) {
      childUpdates.get(sessionId).push(update);
    } else {
      reportError(`session/update for a session neither created nor announced as a child: ${show(params)}`);
    }
  })
  .onNotification("*", refuseNotification);

// ---------------------------------------------------------------------------------------------------------------
// Scenario helpers.

const toolCallItem = (toolCallId) => ({ type: "tool_call", toolCallId });
const subagentItem = (sessionId) => ({ type: "subagent", sessionId });

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

function lists(update, item) {
  return update.sessionUpdate === "state_update" && (update.background ?? []).some((w) => isDeepStrictEqual(w, item));
}

function checkBackground(session, expected, label) {
  check(isDeepStrictEqual(session.background, expected), `${label}: session.background`, {
    sdk: session.background,
    expected,
  });
}

function withdrawalsOf(requestId) {
  return agentMessages().filter(
    (entry) =>
      entry.message.method === "$/cancel_request" && isDeepStrictEqual(entry.message.params?.requestId, requestId),
  );
}

/** Wire position of the first agent message matching `predicate`. */
function seqOf(predicate) {
  return agentMessages().find((entry) => predicate(entry.message))?.seq;
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function backgroundPermission(ctx, session) {
  setStep("/bgask: turn");
  const turn = await promptTurn(session, "/bgask");
  const call = turn.find((u) => u.sessionUpdate === "tool_call_update" && u.title === "Background job");
  check(call, "/bgask: no tool call titled Background job", turn);
  const { toolCallId } = call;

  setStep("/bgask: the permission request");
  const request = await nextPermission(0);
  check(request.params.sessionId === session.sessionId, "/bgask: request for another session", request.params);
  check(
    isDeepStrictEqual(request.params.subject, { type: "tool_call", toolCall: { toolCallId } }),
    "/bgask: the subject does not reference the background tool call",
    request.params,
  );
  check(isDeepStrictEqual(request.params.options, OPTIONS), "/bgask: unexpected options", request.params.options);
  check(request.forBackground === true, "/bgask: isForBackgroundWork was false when the request arrived", {
    request: request.params,
    background: session.background,
  });
  checkBackground(session, [toolCallItem(toolCallId)], "/bgask: while the request is open");

  setStep("/bgask: session/cancel");
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  await sleep(500);
  check(!request.aborted, "/bgask: session/cancel withdrew the request for background work");
  check(withdrawalsOf(request.requestId).length === 0, "/bgask: $/cancel_request sent for the background request");
  const forBackgroundAfterCancel = session.isForBackgroundWork(request.params);
  check(forBackgroundAfterCancel, "/bgask: isForBackgroundWork became false after session/cancel");
  checkBackground(session, [toolCallItem(toolCallId)], "/bgask: after session/cancel");

  setStep("/bgask: answer allow-once");
  request.resolve({ outcome: { outcome: "selected", optionId: "allow-once" } });
  const after = await readUntil(
    session,
    "the snapshot without the tool call",
    (u) => u.sessionUpdate === "state_update" && !lists(u, toolCallItem(toolCallId)),
  );
  const content = after
    .filter((u) => u.sessionUpdate === "tool_call_content_chunk" && u.toolCallId === toolCallId)
    .map((u) => u.content);
  check(
    isDeepStrictEqual(content, [{ type: "content", content: { type: "text", text: "allowed" } }]),
    "/bgask: the answer did not reach the tool call",
    after,
  );
  const final = after.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === toolCallId && u.status);
  check(final?.status === "completed", "/bgask: the tool call did not complete", after);
  const removal = after.at(-1);
  check(removal.state === "idle" && removal.stopReason == null, "/bgask: the removal changed the foreground", removal);
  checkBackground(session, [], "/bgask: after the tool call ended");
  return {
    toolCallId,
    forBackground: request.forBackground,
    forBackgroundAfterCancel,
    withdrawn: request.aborted || withdrawalsOf(request.requestId).length > 0,
    content: content.map((c) => c.content.text),
    finalStatus: final.status,
    backgroundAfter: session.background,
  };
}

async function foregroundPermission(session) {
  setStep("/ask");
  const turnDone = promptTurn(session, "/ask deploy");
  const request = await nextPermission(1);
  check(request.params.sessionId === session.sessionId, "/ask: request for another session", request.params);
  check(request.params.subject?.type === "tool_call", "/ask: the subject is not a tool call", request.params);
  check(request.forBackground === false, "/ask: isForBackgroundWork was true for a foreground request", {
    request: request.params,
    background: session.background,
  });
  request.resolve({ outcome: { outcome: "selected", optionId: "allow-once" } });
  const turn = await turnDone;
  const states = turn.filter((u) => u.sessionUpdate === "state_update").map((u) => u.state);
  check(states.includes("requires_action"), "/ask: no requires_action while the request was open", states);
  const said = turn.filter((u) => u.sessionUpdate === "agent_message").flatMap((u) => u.content.map((b) => b.text));
  check(isDeepStrictEqual(said, ["allowed: deploy"]), "/ask: unexpected reply", said);
  const askCall = turn.find((u) => u.sessionUpdate === "tool_call_update" && u.title === "Ask: deploy");
  check(
    askCall && request.params.subject.toolCall.toolCallId === askCall.toolCallId,
    "/ask: the subject does not reference the turn's tool call",
    { subject: request.params.subject, turn },
  );
  return { forBackground: request.forBackground, states, said };
}

async function subagent(session) {
  setStep("/subagent: turn");
  const turn = await promptTurn(session, `/subagent 1 ${SUBAGENT_TEXT}`);
  const announce = turn.find((u) => u.sessionUpdate === "subagent_update");
  check(announce, "/subagent: no subagent_update in the turn", turn);
  const childId = announce.sessionId;
  check(announce.title === `Subagent: ${SUBAGENT_TEXT}`, "/subagent: unexpected title", announce);
  check(isDeepStrictEqual(announce.capabilities, { cancel: {} }), "/subagent: the child does not advertise cancel");
  const item = subagentItem(childId);

  setStep("/subagent: listed while it runs");
  if (!turn.some((u) => lists(u, item))) {
    await readUntil(session, "a snapshot listing the child", (u) => lists(u, item));
  }
  checkBackground(session, [item], "/subagent: while the child runs");
  const childRunning = (childUpdates.get(childId) ?? []).some((u) => u.sessionUpdate === "state_update");
  check(childRunning, "/subagent: listed before the child reported any state");

  setStep("/subagent: the child finishes");
  const after = await readUntil(
    session,
    "the snapshot without the child",
    (u) => u.sessionUpdate === "state_update" && !lists(u, item),
  );
  checkBackground(session, [], "/subagent: after the child finished");
  const removal = after.at(-1);
  check(removal.state === "idle" && removal.stopReason == null, "/subagent: the removal changed the foreground",
    removal);
  const own = childUpdates.get(childId);
  const text = own
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text)
    .join("");
  check(text === SUBAGENT_TEXT, "/subagent: the child's streamed text", { text, own });
  const childStates = own.filter((u) => u.sessionUpdate === "state_update");
  const childStop = childStates.at(-1);
  check(childStop?.state === "idle" && childStop.stopReason === "end_turn", "/subagent: the child did not end", own);
  // R79 / §11.7: announced before anything names the child; its quiet idle before the snapshot that drops it
  const announcedAt = seqOf(
    (m) => m.params?.update?.sessionUpdate === "subagent_update" && m.params.update.sessionId === childId,
  );
  const firstNamedAt = seqOf((m) => JSON.stringify(m).includes(`"${childId}"`));
  check(announcedAt === firstNamedAt, "/subagent: a message named the child before its announcement");
  const childIdleAt = seqOf((m) => m.params?.sessionId === childId && m.params.update?.stopReason === "end_turn");
  const droppedAt = agentMessages().filter(
    (e) =>
      e.seq > childIdleAt &&
      e.message.params?.sessionId === session.sessionId &&
      e.message.params.update?.sessionUpdate === "state_update",
  )[0]?.seq;
  check(childIdleAt < droppedAt, "/subagent: the parent dropped the child before the child's idle");
  return {
    childId,
    title: announce.title,
    capabilities: announce.capabilities,
    listedWhileRunning: [item],
    backgroundAfter: session.background,
    text,
    childStates: childStates.map((u) => u.state),
    childStopReason: childStop.stopReason,
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
  activeSessions.set(session.sessionId, session);

  const bgask = await backgroundPermission(ctx, session);
  const ask = await foregroundPermission(session);
  const sub = await subagent(session);
  check(permissionRequests.length === 2, "unexpected permission requests", permissionRequests.map((r) => r.params));

  setStep("session/close");
  const closed = await ctx.request("session/close", { sessionId: session.sessionId });
  check(isDeepStrictEqual(closed, {}), "session/close: result is not {}", closed);
  const closeResponse = responseTo(lastClientRequest("session/close"));
  session.dispose();
  return {
    agent: init.info,
    sessionId: session.sessionId,
    childIds: [...childrenOf.keys()],
    bgask,
    ask,
    subagent: sub,
    close: closed,
    closeSeq: closeResponse.seq,
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire(result) {
  checkResponses();
  const ids = new Set([result.sessionId, ...result.childIds]);
  const late = agentMessages().filter(
    (entry) => entry.seq > result.closeSeq && ids.has(entry.message.params?.sessionId),
  );
  check(late.length === 0, "agent sent messages for the session or its child after the session/close response", late);
  const withdrawn = agentMessages().filter((entry) => entry.message.method === "$/cancel_request");
  check(withdrawn.length === 0, "agent withdrew a permission request", withdrawn);
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
      bgask: result.bgask,
      ask: result.ask,
      subagent: result.subagent,
      close: result.close,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
