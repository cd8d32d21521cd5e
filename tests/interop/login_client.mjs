#!/usr/bin/env node
// Drives examples/login_agent.py with the official ACP TypeScript SDK (experimental v2 client API): the auth gate,
// a login that asks a request-scoped form, and forms asked by a prompt, answered through the SDK's
// `elicitation/create` request handler (its request signal tells the client when the agent withdraws a question).
//
//   node tests/interop/login_client.mjs <python> <path/to/examples/login_agent.py>
//
// Scenario: `initialize` (form elicitation advertised; `authMethods` offers `agent-login`); `session/new` before
// login is -32000; `auth/login` whose form is declined is -32000 and the gate stays closed; `auth/login` whose form
// is accepted is `{}` (the form carries `requestId` = the login's id and no `sessionId`); `session/new`; `/ask`
// accepted (`requires_action` while the form waits, `running` after, "Hello, <name>", idle end_turn); `/ask`
// declined; `/ask` answered `cancel`; `/ask` then `session/cancel` while it waits (the agent withdraws the form
// with `$/cancel_request` and ends idle cancelled); `auth/logout` is `{}`; then `session/new` and a prompt on the
// open session are -32000 again. Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on
// stderr on any failed check, any error the SDK reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin
//   ACP_INTEROP_WIRE               file that receives both directions as JSON lines {"from", "message"}, in the
//                                  order the client saw them (for a wire-rule checker)

import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import { client, CreateElicitationRequest, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  check,
  checkResponses,
  CheckFailed,
  clientMessages,
  describeError,
  lastClientRequest,
  reportError,
  responseTo,
  run,
  setStep,
  setup,
  show,
} from "./harness.mjs";
import { QuestionDesk } from "./questions.mjs";

const OVERALL_TIMEOUT_MS = 45_000;
const EXPECTED_AGENT_NAME = "login-agent";
const AUTH_REQUIRED = -32000;
const USER_NAME = "Ada Lovelace";
const LOGIN_NAME = "ada";

setup({
  name: "login_client",
  usage: "usage: node login_client.mjs <python> <path/to/login_agent.py>",
  wireEnv: true,
  describeZodErrors: true,
});

// ---------------------------------------------------------------------------------------------------------------
// Client app: handlers for everything an agent may send, so nothing is left unhandled.

const sessionsCreated = new Set();
const lastState = new Map(); // sessionId -> the state of the latest state_update the client received
const desk = new QuestionDesk();

const app = client({ name: "acp-agent-interop-login" })
  .onRequest("elicitation/create", desk.handler)
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
    if (params.update.sessionUpdate === "state_update") lastState.set(params.sessionId, params.update.state);
  })
  .onNotification("elicitation/complete", ({ params }) => {
    reportError(`unexpected elicitation/complete (no url elicitation was asked): ${show(params)}`);
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

async function rejectsWith(promise, code, label) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof RequestError && error.code === code, `${label}: expected error ${code}`, describeError(error));
    return error.code;
  }
  throw new CheckFailed(`${label}: the agent accepted it, expected error ${code}`);
}

/** Reads session updates until `done(update, message)` holds; returns every update read, the matching one last. */
async function readUntil(session, done) {
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    updates.push(message.update);
    if (done(message.update, message)) return updates;
  }
}

const isState = (state) => (update) => update.sessionUpdate === "state_update" && update.state === state;
const statesIn = (updates) => updates.filter((u) => u.sessionUpdate === "state_update").map((u) => u.state);
const isAgentOutput = (update) =>
  ["agent_message", "agent_message_chunk", "agent_thought", "agent_thought_chunk"].includes(update.sessionUpdate);

/** The agent's message text in `updates` (full messages replace, chunks append), by messageId, in order. */
function agentTexts(updates) {
  const texts = new Map();
  for (const update of updates) {
    if (update.sessionUpdate === "agent_message") {
      texts.set(update.messageId, (update.content ?? []).map((b) => (b.type === "text" ? b.text : "")).join(""));
    } else if (update.sessionUpdate === "agent_message_chunk") {
      const block = update.content;
      texts.set(update.messageId, (texts.get(update.messageId) ?? "") + (block.type === "text" ? block.text : ""));
    }
  }
  return [...texts.values()];
}

/** `$/cancel_request` notifications the agent sent for `requestId`. */
function withdrawalsOf(requestId) {
  return agentMessages().filter(
    (entry) =>
      entry.message.method === "$/cancel_request" && isDeepStrictEqual(entry.message.params?.requestId, requestId),
  );
}

/** Checks the shape of the name form, and the scope it names: `{sessionId}` or `{requestId}`. */
function checkNameForm(question, scope, label) {
  const { params } = question;
  check(CreateElicitationRequest.isForm(params), `${label}: not a form-mode elicitation (SDK guard)`, params);
  check(!CreateElicitationRequest.isUrl(params), `${label}: the SDK also reads it as a url elicitation`, params);
  const schema = params.requestedSchema;
  check(schema?.type === "object", `${label}: requestedSchema is not an object schema`, params);
  check(schema.properties?.name?.type === "string", `${label}: no string property "name"`, params);
  check(isDeepStrictEqual(schema.required, ["name"]), `${label}: "name" is not the one required property`, params);
  check(typeof params.message === "string" && params.message !== "", `${label}: no message`, params);
  if ("sessionId" in scope) {
    check(params.sessionId === scope.sessionId, `${label}: not scoped to the session`, params);
    check(!("requestId" in params), `${label}: a session-scoped form also carries requestId`, params);
  } else {
    check(isDeepStrictEqual(params.requestId, scope.requestId), `${label}: requestId is not the login's id`, {
      params,
      loginId: scope.requestId,
    });
    check(!("sessionId" in params), `${label}: a request-scoped form also carries sessionId`, params);
  }
  check(!("toolCallId" in params), `${label}: names a tool call`, params);
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

/** `auth/login` that the agent answers after asking a request-scoped form, which the client answers `result`. */
async function loginWithForm(ctx, label, result) {
  setStep(label);
  const login = settle(ctx.request("auth/login", { methodId: "agent-login" }));
  const question = await desk.next();
  const loginRequest = lastClientRequest("auth/login");
  checkNameForm(question, { requestId: loginRequest.message.id }, label);
  check(responseTo(loginRequest) === undefined, `${label}: the login was answered before its form`);
  question.answer(result);
  const outcome = await login;
  const answerEntry = clientMessages().find((e) => !("method" in e.message) && isDeepStrictEqual(e.message.id, question.requestId));
  check(answerEntry && answerEntry.seq < responseTo(loginRequest).seq, `${label}: the login was answered before the form's answer`);
  return { outcome, question };
}

/**
 * Prompts `/ask` and reads up to the `requires_action` snapshot and the form the foreground waits on; checks that
 * the client sees `requires_action` while the form is pending.
 */
async function askAndWait(session, label) {
  setStep(`${label}: /ask`);
  const prompt = settle(session.prompt("/ask"));
  const toBlocked = await readUntil(session, isState("requires_action"));
  const question = await desk.next();
  checkNameForm(question, { sessionId: session.sessionId }, label);
  check(question.pending, `${label}: the form is not pending`);
  check(lastState.get(session.sessionId) === "requires_action", `${label}: the client does not see requires_action while the form waits`, {
    state: lastState.get(session.sessionId),
  });
  check(isDeepStrictEqual(statesIn(toBlocked), ["running", "requires_action"]), `${label}: states before the form`, toBlocked);
  const answered = await prompt;
  if (!answered.ok) throw answered.error;
  check(typeof answered.value.messageId === "string", `${label}: bad prompt response`, answered.value);
  return { question, toBlocked };
}

/** `/ask` answered with `result`; returns what the turn showed after the answer. */
async function askAnswered(session, label, result, expectedStop) {
  const { question, toBlocked } = await askAndWait(session, label);
  setStep(`${label}: answer`);
  question.answer(result);
  const after = await readUntil(session, (_, message) => message.kind === "stop" && message.stopReason != null);
  const stop = after.at(-1);
  check(stop.stopReason === expectedStop, `${label}: the turn did not end ${expectedStop}`, stop);
  check(isDeepStrictEqual(statesIn(after), ["running", "idle"]), `${label}: states after the answer`, after);
  const resumed = after.findIndex(isState("running"));
  check(!after.slice(0, resumed).some(isAgentOutput), `${label}: agent output while requires_action`, after);
  check(withdrawalsOf(question.requestId).length === 0, `${label}: the answered form was withdrawn`);
  return {
    states: statesIn([...toBlocked, ...after]),
    said: agentTexts(after),
    stopReason: stop.stopReason,
  };
}

/** `/ask`, then `session/cancel` while the form waits: the agent withdraws the form and ends idle cancelled. */
async function askCancelled(ctx, session, label) {
  const { question, toBlocked } = await askAndWait(session, label);
  setStep(`${label}: session/cancel`);
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const cancelEntry = clientMessages().findLast((e) => e.message.method === "session/cancel");
  const after = await readUntil(session, (_, message) => message.kind === "stop" && message.stopReason != null);
  const stop = after.at(-1);
  check(stop.stopReason === "cancelled", `${label}: the turn did not end cancelled`, stop);
  await question.withdrawal;
  check(question.withdrawn && !question.answered, `${label}: the form was not withdrawn`);
  const withdrawals = withdrawalsOf(question.requestId);
  check(withdrawals.length === 1, `${label}: expected one $/cancel_request for the form`, withdrawals);
  const idleEntry = agentMessages().findLast(
    (e) => e.message.method === "session/update" && e.message.params?.update?.stopReason === "cancelled",
  );
  check(
    cancelEntry.seq < withdrawals[0].seq && withdrawals[0].seq < idleEntry.seq,
    `${label}: $/cancel_request is not between session/cancel and the idle`,
    { cancel: cancelEntry.seq, withdrawal: withdrawals[0].seq, idle: idleEntry.seq },
  );
  check(!after.some(isAgentOutput), `${label}: agent output after session/cancel`, after);
  return {
    states: statesIn([...toBlocked, ...after]),
    withdrawn: question.withdrawn,
    withdrawals: withdrawals.length,
    stopReason: stop.stopReason,
  };
}

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop-login", version: "0.0.0" },
    capabilities: { elicitation: { form: {} } },
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${EXPECTED_AGENT_NAME}`, init);
  const method = (init.authMethods ?? []).find((m) => m.methodId === "agent-login");
  check(method && method.type === "agent" && typeof method.name === "string", "initialize: no agent-login method", init);

  setStep("session/new before login");
  const beforeLogin = await rejectsWith(ctx.buildSession(process.cwd()).start(), AUTH_REQUIRED, "session/new before login");

  const declined = await loginWithForm(ctx, "auth/login, form declined", { action: "decline" });
  check(!declined.outcome.ok, "auth/login with a declined form succeeded", declined.outcome.value);
  const declinedCode = await rejectsWith(Promise.reject(declined.outcome.error), AUTH_REQUIRED, "declined login");
  setStep("session/new after a refused login");
  const afterRefused = await rejectsWith(ctx.buildSession(process.cwd()).start(), AUTH_REQUIRED, "session/new after a refused login");

  const accepted = await loginWithForm(ctx, "auth/login, form accepted", { action: "accept", content: { name: LOGIN_NAME } });
  if (!accepted.outcome.ok) throw accepted.outcome.error;
  check(isDeepStrictEqual(accepted.outcome.value, {}), "auth/login: result is not {}", accepted.outcome.value);

  setStep("session/new after login");
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);

  const accept = await askAnswered(session, "/ask accepted", { action: "accept", content: { name: USER_NAME } }, "end_turn");
  check(isDeepStrictEqual(accept.said, [`Hello, ${USER_NAME}`]), "/ask accepted: the agent did not greet", accept.said);
  const decline = await askAnswered(session, "/ask declined", { action: "decline" }, "end_turn");
  check(isDeepStrictEqual(decline.said, ["You declined to answer."]), "/ask declined: the agent said", decline.said);
  const dismissed = await askAnswered(session, "/ask answered cancel", { action: "cancel" }, "cancelled");
  check(dismissed.said.length === 0, "/ask answered cancel: the agent said something", dismissed.said);
  const cancelled = await askCancelled(ctx, session, "/ask + session/cancel");

  setStep("auth/logout");
  const loggedOut = await ctx.request("auth/logout", {});
  check(isDeepStrictEqual(loggedOut, {}), "auth/logout: result is not {}", loggedOut);
  setStep("after logout");
  const newAfterLogout = await rejectsWith(ctx.buildSession(process.cwd()).start(), AUTH_REQUIRED, "session/new after logout");
  const promptAfterLogout = await rejectsWith(session.prompt("hello"), AUTH_REQUIRED, "session/prompt after logout");
  check(desk.untaken.length === 0, "questions the scenario never took", desk.untaken.map((q) => q.params));
  session.dispose();

  return {
    agent: init.info,
    authMethods: init.authMethods,
    beforeLogin,
    login: {
      declined: declinedCode,
      afterRefused,
      accepted: accepted.outcome.value,
      questionScope: Object.keys(accepted.question.params).filter((k) => k === "requestId" || k === "sessionId"),
      requestIdIsLogin: isDeepStrictEqual(accepted.question.params.requestId, lastClientRequest("auth/login").message.id),
    },
    accept,
    decline,
    dismissed,
    cancelled,
    logout: { result: loggedOut, newSession: newAfterLogout, prompt: promptAfterLogout },
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire() {
  checkResponses({ noStrayResponses: true });
  // Every question the agent asked was answered by the client exactly once (withdrawn ones with `cancel`).
  for (const question of desk.questions) {
    const answers = clientMessages().filter(
      (e) => !("method" in e.message) && isDeepStrictEqual(e.message.id, question.requestId),
    );
    check(answers.length === 1, "a question did not get exactly one answer", { params: question.params, answers });
  }
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
      questions: desk.questions.length,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
