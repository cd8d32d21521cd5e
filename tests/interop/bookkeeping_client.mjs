#!/usr/bin/env node
// Drives tests/helpers/bookkeeping_agent.py with the official ACP TypeScript SDK (experimental v2 client API): the
// unstable session bookkeeping (`session/set_title`, `session/archive`, `session/unarchive`, `session/status`, the
// `archived` filter of `session/list`) and providers (`providers/list`, `providers/set`, `providers/disable`).
//
//   node tests/interop/bookkeeping_client.mjs <python> <path/to/tests/helpers/bookkeeping_agent.py>
//
// Two runs against two agent processes on one SQLite file (ACP_AGENT_DATA_DIR), chosen by ACP_INTEROP_PHASE:
//   first   capabilities; providers listed, set (with a secret header, ACP_INTEROP_SECRET), refused (unknown id,
//           required one disabled), set and disabled; session A titled (trimmed, reported by a session_info_update
//           before the answer); session B archived while a turn runs (idle `cancelled` before the answer, nothing
//           for B after it) and archived again; session C closed, then titled and asked for its status (saved); A's
//           status (open, idle); the list with each filter and a bad one; unknown ids and an empty title refused.
//   second  (ACP_INTEROP_SESSIONS: the first run's ids) the titles and archive marks listed after the restart; A
//           saved until resumed, then open; B unarchived; providers back to what the agent declares.
// Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on stderr otherwise. The
// environment variables of harness.mjs apply (ACP_INTEROP_TRANSCRIPT, ACP_INTEROP_CLIENT_TRANSCRIPT, ACP_INTEROP_WIRE).

import process from "node:process";

import { client } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  check,
  checkResponses,
  clientMessages,
  lastClientRequest,
  refuseNotification,
  refuseRequest,
  responseTo,
  run,
  setStep,
  setup,
  updatesOnlyFor,
} from "./harness.mjs";
import { isState, promptTurn, readUntil, readUntilStop, rejectsWith } from "./questions.mjs";

const OVERALL_TIMEOUT_MS = 40_000;
const PHASE = process.env.ACP_INTEROP_PHASE ?? "first";
const SECRET = process.env.ACP_INTEROP_SECRET ?? "no-secret-given";
const INVALID_PARAMS = -32602;
const NOT_FOUND = -32002;
const DECLARED_MAIN = { apiType: "anthropic", baseUrl: "https://api.anthropic.com" };

await setup({
  name: "bookkeeping_client",
  usage: "usage: node bookkeeping_client.mjs <python> <path/to/bookkeeping_agent.py>",
  wireEnv: true,
  describeZodErrors: true,
});

// ---------------------------------------------------------------------------------------------------------------
// Client app.

const sessionsKnown = new Set(); // created or resumed by this client
const app = client({ name: "acp-agent-interop-bookkeeping" })
  .onRequest("*", refuseRequest)
  .onNotification("session/update", updatesOnlyFor(sessionsKnown))
  .onNotification("*", refuseNotification);

// ---------------------------------------------------------------------------------------------------------------
// Helpers.

async function list(ctx, archived) {
  setStep(`session/list archived=${archived}`);
  const params = archived === undefined ? {} : { archived };
  const page = await ctx.request("session/list", params);
  check(page.nextCursor == null, "session/list: unexpected second page", page);
  return page.sessions.map((s) => ({ id: s.sessionId, title: s.title ?? null, archived: s.archived }));
}

async function status(ctx, sessionId) {
  setStep(`session/status ${sessionId}`);
  return ctx.request("session/status", { sessionId });
}

async function startSession(ctx) {
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsKnown.add(session.sessionId);
  return session;
}

/** The agent's messages about `sessionId` after the wire entry `after`. */
function sessionMessagesAfter(sessionId, after) {
  return agentMessages().filter((e) => e.seq > after.seq && e.message.params?.sessionId === sessionId);
}

// ---------------------------------------------------------------------------------------------------------------
// First run.

async function providers(ctx) {
  setStep("providers/list");
  const declared = await ctx.request("providers/list", {});
  const headers = { Authorization: `Bearer ${SECRET}` };
  setStep("providers/set main");
  const set = await ctx.request("providers/set", {
    providerId: "main",
    apiType: "openai",
    baseUrl: "https://gateway.example/v1",
    headers,
  });
  const afterSet = (await ctx.request("providers/list", {})).providers;
  const unknown = await rejectsWith(
    ctx.request("providers/set", { providerId: "nope", apiType: "openai", baseUrl: "https://x.example", headers }),
    INVALID_PARAMS,
    "providers/set of an unknown provider",
  );
  const unsupported = await rejectsWith(
    ctx.request("providers/set", { providerId: "embeddings", apiType: "bedrock", baseUrl: "https://x.example", headers }),
    INVALID_PARAMS,
    "providers/set with a protocol the provider does not speak",
  );
  const required = await rejectsWith(
    ctx.request("providers/disable", { providerId: "main" }),
    INVALID_PARAMS,
    "providers/disable of a required provider",
  );
  setStep("providers/set + disable embeddings");
  await ctx.request("providers/set", { providerId: "embeddings", apiType: "openai", baseUrl: "https://e.example", headers });
  const disabled = await ctx.request("providers/disable", { providerId: "embeddings" });
  const afterDisable = (await ctx.request("providers/list", {})).providers;
  return { declared: declared.providers, set, afterSet, unknown, unsupported, required, disabled, afterDisable };
}

async function titled(ctx) {
  const session = await startSession(ctx);
  const agentTitle = await promptTurn(session, "retitle", "retitle The agent's title");
  check(agentTitle.some((u) => u.sessionUpdate === "session_info_update"), "retitle: no session_info_update");
  setStep("session/set_title A");
  const answer = await ctx.request("session/set_title", { sessionId: session.sessionId, title: "  Kept title \n" });
  const seen = await readUntil(session, (u) => u.sessionUpdate === "session_info_update");
  const update = seen.at(-1);
  const updateEntry = agentMessages().findLast((e) => e.message.params?.update?.sessionUpdate === "session_info_update");
  const answerEntry = responseTo(lastClientRequest("session/set_title"));
  check(updateEntry.seq < answerEntry.seq, "set_title: the session_info_update came after the answer");
  const empty = await rejectsWith(
    ctx.request("session/set_title", { sessionId: session.sessionId, title: "   " }),
    INVALID_PARAMS,
    "an empty title",
  );
  return { session, answer, update: { title: update.title }, empty };
}

async function archivedWhileRunning(ctx) {
  const session = await startSession(ctx);
  setStep("B: sleep");
  await session.prompt("sleep 30");
  await readUntil(session, isState("running"));
  setStep("session/archive B");
  const answer = await ctx.request("session/archive", { sessionId: session.sessionId });
  const answerEntry = responseTo(lastClientRequest("session/archive"));
  const stop = await readUntilStop(session);
  const idle = agentMessages().findLast(
    (e) => e.message.params?.sessionId === session.sessionId && e.message.params.update?.state === "idle",
  );
  check(idle.seq < answerEntry.seq, "archive: the turn's idle came after the answer");
  const again = await ctx.request("session/archive", { sessionId: session.sessionId });
  session.dispose();
  return { session, answer, answerEntry, stopReason: stop.at(-1).stopReason, again };
}

async function firstRun(ctx, init) {
  const caps = init.capabilities;
  const providersResult = await providers(ctx);
  const a = await titled(ctx);
  const b = await archivedWhileRunning(ctx);
  const c = await startSession(ctx);
  setStep("session/close C");
  await ctx.request("session/close", { sessionId: c.sessionId });
  c.dispose();
  setStep("session/set_title C (stored only)");
  const storedTitle = await ctx.request("session/set_title", { sessionId: c.sessionId, title: "Stored title" });
  const statuses = {
    a: await status(ctx, a.session.sessionId),
    b: await status(ctx, b.session.sessionId),
    c: await status(ctx, c.sessionId),
  };
  const unknown = {
    status: await rejectsWith(status(ctx, "sess_unknown"), NOT_FOUND, "session/status of an unknown session"),
    title: await rejectsWith(
      ctx.request("session/set_title", { sessionId: "sess_unknown", title: "t" }),
      NOT_FOUND,
      "session/set_title of an unknown session",
    ),
    archive: await rejectsWith(
      ctx.request("session/archive", { sessionId: "sess_unknown" }),
      NOT_FOUND,
      "session/archive of an unknown session",
    ),
  };
  let unknownData;
  try {
    await status(ctx, "sess_unknown");
  } catch (error) {
    unknownData = error.data;
  }
  const lists = {
    default: await list(ctx),
    exclude: await list(ctx, "exclude"),
    only: await list(ctx, "only"),
    include: await list(ctx, "include"),
    bad: await rejectsWith(ctx.request("session/list", { archived: "_vendor_all" }), INVALID_PARAMS, "a bad filter"),
  };
  a.session.dispose();
  return {
    capabilities: { session: caps.session, providers: caps.providers },
    providers: providersResult,
    title: { answer: a.answer, update: a.update, empty: a.empty, stored: storedTitle },
    archive: { answer: b.answer, stopReason: b.stopReason, again: b.again, afterwards: b.answerEntry },
    statuses,
    unknown: { ...unknown, statusData: unknownData },
    lists,
    sessions: { a: a.session.sessionId, b: b.session.sessionId, c: c.sessionId },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Second run (a new agent process on the same SQLite file).

async function secondRun(ctx) {
  const ids = JSON.parse(process.env.ACP_INTEROP_SESSIONS);
  const listed = { default: await list(ctx), only: await list(ctx, "only") };
  const before = await status(ctx, ids.a);
  setStep("session/resume A");
  sessionsKnown.add(ids.a);
  await ctx.request("session/resume", { sessionId: ids.a, cwd: process.cwd() });
  const after = await status(ctx, ids.a);
  setStep("session/unarchive B");
  const unarchived = await ctx.request("session/unarchive", { sessionId: ids.b });
  const afterUnarchive = await list(ctx);
  const providers = (await ctx.request("providers/list", {})).providers;
  setStep("session/close A");
  await ctx.request("session/close", { sessionId: ids.a });
  return { listed, statuses: { before, after }, unarchived, afterUnarchive, providers };
}

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop-bookkeeping", version: "0.0.0" },
    capabilities: {},
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  return PHASE === "second" ? { phase: PHASE, ...(await secondRun(ctx)) } : { phase: PHASE, ...(await firstRun(ctx, init)) };
}

function checkWire(result) {
  checkResponses({ noStrayResponses: true });
  if (result.phase === "first") {
    const after = sessionMessagesAfter(result.sessions.b, result.archive.afterwards);
    check(after.length === 0, "messages for the archived session after the archive answer", after);
    result.archive.afterwards = after.length;
  }
  const secretSeen = agentMessages().filter((e) => JSON.stringify(e.message).includes(SECRET));
  check(secretSeen.length === 0, "the agent echoed the provider secret", secretSeen);
  check(
    clientMessages().some((e) => JSON.stringify(e.message).includes(SECRET)) === (result.phase === "first"),
    "the secret was (not) sent as the scenario says",
  );
}

process.exit(
  await run({
    app,
    scenario,
    timeoutMs: OVERALL_TIMEOUT_MS,
    checkWire,
    tailLength: 12,
    summary: (result, exit) => ({
      ...result,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
