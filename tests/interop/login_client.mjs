#!/usr/bin/env node
// Drives examples/login_agent.py with the official ACP TypeScript SDK (experimental v2 client API): the auth gate,
// a login that asks a request-scoped form, and forms asked by a prompt, answered through the SDK's
// `elicitation/create` request handler (its request signal tells the client when the agent withdraws a question).
//
//   node tests/interop/login_client.mjs <python> <path/to/examples/login_agent.py>
//
// Scenario: `initialize` (form elicitation advertised; `authMethods` offers `agent-login`); `session/new` before
// login is -32000; `auth/login` whose form is declined is -32000 and the gate stays closed; `auth/login` withdrawn
// by the client (`$/cancel_request`) while its form waits (the agent withdraws the form too, and answers the login
// -32800); `auth/login` whose form is accepted is `{}` (the form carries `requestId` = the login's id and no
// `sessionId`); `session/new`; `/ask` accepted (`requires_action` while the form waits, `running` after,
// "Hello, <name>", idle end_turn); `/ask` declined; `/ask` answered `cancel`; `/ask` then `session/cancel` while it
// waits (the agent withdraws the form with `$/cancel_request` and ends idle cancelled); `auth/logout` is `{}`; then
// `session/new` and a prompt on the open session are -32000 again. Exit 0 and a one-line JSON summary on stdout on
// success; exit 1 with a message on stderr on any failed check, any error the SDK reports, or a timeout. Optional
// environment variables:
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
  updatesOnlyFor,
} from "./harness.mjs";
import {
  askAnswered,
  askCancelled,
  checkEveryQuestionAnswered,
  clientAnswersTo,
  QuestionDesk,
  rejectsWith,
  settle,
  withdrawalsOf,
} from "./questions.mjs";

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
const desk = new QuestionDesk();

const app = client({ name: "acp-agent-interop-login" })
  .onRequest("elicitation/create", desk.handler)
  .onRequest("session/request_permission", ({ params }) => {
    reportError(`unexpected permission request: ${show(params)}`);
    return { outcome: { outcome: "cancelled" } };
  })
  .onRequest("*", refuseRequest)
  .onNotification("session/update", updatesOnlyFor(sessionsCreated))
  .onNotification("elicitation/complete", ({ params }) => {
    reportError(`unexpected elicitation/complete (no url elicitation was asked): ${show(params)}`);
  })
  .onNotification("*", refuseNotification);

// ---------------------------------------------------------------------------------------------------------------
// Scenario helpers.

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
  const [answerEntry] = clientAnswersTo(question.requestId);
  check(answerEntry && answerEntry.seq < responseTo(loginRequest).seq, `${label}: the login was answered before the form's answer`);
  return { outcome, question };
}

/**
 * `auth/login` withdrawn by the client (`$/cancel_request`) while its form waits: the agent withdraws the form in
 * turn, still answers the login once (R16), and the gate stays closed.
 */
async function loginWithdrawn(ctx) {
  const label = "auth/login withdrawn while its form waits";
  setStep(label);
  const withdraw = new AbortController();
  const login = settle(ctx.request("auth/login", { methodId: "agent-login" }, { cancellationSignal: withdraw.signal }));
  const question = await desk.next();
  const loginRequest = lastClientRequest("auth/login");
  checkNameForm(question, { requestId: loginRequest.message.id }, label);
  withdraw.abort();
  await question.withdrawal;
  const outcome = await login;
  check(!outcome.ok, `${label}: the login succeeded`, outcome.value);
  check(question.withdrawn && !question.answered, `${label}: the form was not withdrawn`);
  check(withdrawalsOf(question.requestId).length === 1, `${label}: expected one $/cancel_request for the form`);
  return { code: outcome.error?.code, formWithdrawn: question.withdrawn };
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

  const withdrawnLogin = await loginWithdrawn(ctx);
  setStep("session/new after a withdrawn login");
  const afterWithdrawn = await rejectsWith(ctx.buildSession(process.cwd()).start(), AUTH_REQUIRED, "session/new after a withdrawn login");

  const accepted = await loginWithForm(ctx, "auth/login, form accepted", { action: "accept", content: { name: LOGIN_NAME } });
  if (!accepted.outcome.ok) throw accepted.outcome.error;
  check(isDeepStrictEqual(accepted.outcome.value, {}), "auth/login: result is not {}", accepted.outcome.value);

  setStep("session/new after login");
  const session = await ctx.buildSession(process.cwd()).start();
  sessionsCreated.add(session.sessionId);

  const form = (label) => (question) => checkNameForm(question, { sessionId: session.sessionId }, label);
  const ask = (label, result, stop) => askAnswered(desk, session, label, "/ask", form(label), result, stop);
  const accept = await ask("/ask accepted", { action: "accept", content: { name: USER_NAME } }, "end_turn");
  check(isDeepStrictEqual(accept.said, [`Hello, ${USER_NAME}`]), "/ask accepted: the agent did not greet", accept.said);
  const decline = await ask("/ask declined", { action: "decline" }, "end_turn");
  check(isDeepStrictEqual(decline.said, ["You declined to answer."]), "/ask declined: the agent said", decline.said);
  const dismissed = await ask("/ask answered cancel", { action: "cancel" }, "cancelled");
  check(dismissed.said.length === 0, "/ask answered cancel: the agent said something", dismissed.said);
  const cancelled = await askCancelled(ctx, desk, session, "/ask + session/cancel", "/ask", form("/ask + session/cancel"));

  setStep("auth/logout");
  const loggedOut = await ctx.request("auth/logout", {});
  check(isDeepStrictEqual(loggedOut, {}), "auth/logout: result is not {}", loggedOut);
  setStep("after logout");
  const newAfterLogout = await rejectsWith(ctx.buildSession(process.cwd()).start(), AUTH_REQUIRED, "session/new after logout");
  const promptAfterLogout = await rejectsWith(session.prompt("hello"), AUTH_REQUIRED, "session/prompt after logout");
  session.dispose();

  return {
    agent: init.info,
    authMethods: init.authMethods,
    beforeLogin,
    login: {
      declined: declinedCode,
      afterRefused,
      withdrawn: withdrawnLogin,
      afterWithdrawn,
      accepted: accepted.outcome.value,
      questionScope: Object.keys(accepted.question.params).filter((k) => k === "requestId" || k === "sessionId"),
      requestIdIsLogin: isDeepStrictEqual(accepted.question.params.requestId, lastClientRequest("auth/login").message.id),
    },
    accept: { states: accept.states, said: accept.said, stopReason: accept.stopReason },
    decline: { states: decline.states, said: decline.said, stopReason: decline.stopReason },
    dismissed: { states: dismissed.states, said: dismissed.said, stopReason: dismissed.stopReason },
    cancelled: {
      states: cancelled.states,
      withdrawn: cancelled.withdrawn,
      withdrawals: cancelled.withdrawals,
      stopReason: cancelled.stopReason,
    },
    logout: { result: loggedOut, newSession: newAfterLogout, prompt: promptAfterLogout },
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire() {
  checkResponses({ noStrayResponses: true });
  checkEveryQuestionAnswered(desk);
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
