#!/usr/bin/env node
// Drives tests/helpers/surface_agent.py with the official ACP TypeScript SDK (experimental v2 client API): URL-mode
// questions, extension methods in both directions, and `_meta` round trips.
//
//   node tests/interop/surface_client.mjs <python> <path/to/tests/helpers/surface_agent.py>
//
// Scenario: `initialize` (only url elicitation advertised); the agent's extension request `_test/echo`, an unknown
// one (-32601) and the notification `_test/ping` (which `/pings` reports); `session/new` with `_meta`; `/meta`, a
// `session/prompt` with `_meta` on the request and on its text block (the agent reports both and sends its message
// with `_meta`); `/call` (the agent calls the client's `_test/hello`, registered with the SDK's extension-method
// API), `/call-missing` (the client answers -32601), `/call-slow` (the agent gives up after its timeout and
// withdraws the call with `$/cancel_request`), `/call-wait` + `session/cancel` (withdrawn the same way; the turn
// ends cancelled); `/url` accepted (`requires_action` while it waits, then `elicitation/complete` for its
// elicitationId), declined, answered `cancel`, and withdrawn after `session/cancel`; `session/resume` with `_meta`
// (the agent sees the new one); `/url` + `session/close` (withdrawn before the close answer). Exit 0 and a
// one-line JSON summary on stdout on success; exit 1 with a message on stderr on any failed check, any error the SDK
// reports, or a timeout. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin
//   ACP_INTEROP_WIRE               file that receives both directions as JSON lines {"from", "message"}, in the
//                                  order the client saw them (for a wire-rule checker)

import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import { client, CreateElicitationRequest, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import {
  agentMessages,
  allowClientErrors,
  check,
  checkResponses,
  clientMessages,
  lastClientRequest,
  refuseNotification,
  reportError,
  responseTo,
  run,
  setStep,
  setup,
  show,
  updatesOnlyFor,
} from "./harness.mjs";
import {
  agentTexts,
  askAndWait,
  askAnswered,
  askCancelled,
  checkEveryQuestionAnswered,
  clientAnswersTo,
  promptTurn,
  QuestionDesk,
  readUntil,
  readUntilStop,
  rejectsWith,
  statesIn,
  waitFor,
  withdrawalsOf,
} from "./questions.mjs";

const OVERALL_TIMEOUT_MS = 45_000;
const EXPECTED_AGENT_NAME = "surface-agent";
const CLIENT_NAME = "acp-agent-interop-surface";
const SIGN_IN_URL = "https://example.com/sign-in";

setup({
  name: "surface_client",
  usage: "usage: node surface_client.mjs <python> <path/to/surface_agent.py>",
  wireEnv: true,
  describeZodErrors: true,
});

// ---------------------------------------------------------------------------------------------------------------
// Client app: handlers for everything an agent may send, so nothing is left unhandled.

const sessionsCreated = new Set();
const desk = new QuestionDesk();
const completed = []; // elicitation/complete params, in arrival order
const helloCalls = []; // params of the agent's _test/hello requests
const slowCalls = []; // {requestId, withdrawn} for the agent's _test/slow requests
const asIs = (params) => params;

// `/call-missing`: the client has no `_test/missing` and says so.
allowClientErrors((request, response) => request?.method === "_test/missing" && response.error.code === -32601);

const app = client({ name: CLIENT_NAME })
  .onRequest("elicitation/create", desk.handler)
  .onRequest("_test/hello", asIs, ({ params }) => {
    helloCalls.push(params);
    return { hello: params.n, from: "typescript-sdk" };
  })
  .onRequest("_test/slow", asIs, ({ requestId, signal }) => {
    // Never answered by the scenario: the agent gives up (timeout or session/cancel) and withdraws it.
    const call = { requestId, withdrawn: false };
    slowCalls.push(call);
    return new Promise((resolve) => {
      signal.addEventListener(
        "abort",
        () => {
          call.withdrawn = true;
          resolve({ late: true });
        },
        { once: true },
      );
    });
  })
  .onRequest("session/request_permission", ({ params }) => {
    reportError(`unexpected permission request: ${show(params)}`);
    return { outcome: { outcome: "cancelled" } };
  })
  .onRequest("*", ({ method, params }) => {
    if (method !== "_test/missing") reportError(`unexpected request from the agent: ${method} ${show(params)}`);
    throw RequestError.methodNotFound(method);
  })
  .onNotification("session/update", updatesOnlyFor(sessionsCreated))
  .onNotification("elicitation/complete", ({ params }) => {
    completed.push(params);
  })
  .onNotification("*", refuseNotification);

// ---------------------------------------------------------------------------------------------------------------
// Scenario helpers.

/** The text of the one agent message of a turn. */
function saidIn(updates, label) {
  const said = agentTexts(updates);
  check(said.length === 1, `${label}: expected one agent message`, updates);
  return said[0];
}

/** Checks a session-scoped URL question: SDK guard, url, a fresh elicitationId, no form fields. */
function urlQuestion(session, label, seen) {
  return (question) => {
    const { params } = question;
    check(CreateElicitationRequest.isUrl(params), `${label}: not a url-mode elicitation (SDK guard)`, params);
    check(!CreateElicitationRequest.isForm(params), `${label}: the SDK also reads it as a form`, params);
    check(params.url === SIGN_IN_URL, `${label}: unexpected url`, params);
    check(params.sessionId === session.sessionId && !("requestId" in params), `${label}: not scoped to the session`, params);
    check(typeof params.elicitationId === "string" && !seen.has(params.elicitationId), `${label}: elicitationId`, params);
    check(!("requestedSchema" in params), `${label}: a url question with a form schema`, params);
    seen.add(params.elicitationId);
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The scenario.

async function extensionsFromTheClient(ctx) {
  setStep("_test/echo");
  const echoed = await ctx.request("_test/echo", { x: 1, nested: { y: [1, 2] } });
  check(
    isDeepStrictEqual(echoed, { echo: { x: 1, nested: { y: [1, 2] } }, client: CLIENT_NAME }),
    "_test/echo: unexpected result",
    echoed,
  );
  setStep("_test/nope");
  const unknown = await rejectsWith(ctx.request("_test/nope", {}), -32601, "an unknown extension method");
  setStep("_test/ping");
  await ctx.notify("_test/ping", { t: 1 });
  return { echoed, unknown };
}

/** `/meta` with `_meta` on the prompt request and its text block; what the agent reports it saw. */
async function meta(ctx, session, label) {
  setStep(label);
  const [response, updates] = await Promise.all([
    ctx.request("session/prompt", {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text: "/meta", _meta: { block: 1 } }],
      _meta: { trace: "prompt-1" },
    }),
    readUntilStop(session),
  ]);
  check(typeof response.messageId === "string", `${label}: bad prompt response`, response);
  const seen = JSON.parse(saidIn(updates, label));
  const message = updates.find((u) => u.sessionUpdate === "agent_message");
  return { seen, messageMeta: message?._meta ?? null };
}

async function calls(ctx, session) {
  const call = saidIn(await promptTurn(session, "/call", "/call"), "/call");
  check(isDeepStrictEqual(helloCalls, [{ n: 1 }]), "/call: the client's _test/hello params", helloCalls);

  const missing = saidIn(await promptTurn(session, "/call-missing", "/call-missing"), "/call-missing");

  const slow = saidIn(await promptTurn(session, "/call-slow", "/call-slow"), "/call-slow");
  check(slowCalls.length === 1, "/call-slow: expected one _test/slow call", slowCalls);
  await waitFor(() => slowCalls[0].withdrawn, "/call-slow: the withdrawal of the call");
  const slowWithdrawals = withdrawalsOf(slowCalls[0].requestId).length;

  setStep("/call-wait + session/cancel");
  const prompt = session.prompt("/call-wait");
  const reading = readUntilStop(session);
  await waitFor(() => slowCalls.length === 2, "the agent's _test/slow call");
  await prompt;
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const waited = await reading;
  const stop = waited.at(-1);
  check(stop.stopReason === "cancelled", "/call-wait: the turn did not end cancelled", stop);
  await waitFor(() => slowCalls[1].withdrawn, "/call-wait: the withdrawal of the call by session/cancel");
  check(agentTexts(waited).length === 0, "/call-wait: the agent said something", waited);
  return {
    call: JSON.parse(call),
    missing,
    slow,
    slowWithdrawals,
    wait: {
      states: statesIn(waited),
      stopReason: stop.stopReason,
      withdrawals: withdrawalsOf(slowCalls[1].requestId).length,
    },
  };
}

async function urlQuestions(ctx, session) {
  const seen = new Set();
  const ask = (label, result, stop) =>
    askAnswered(desk, session, label, "/url", urlQuestion(session, label, seen), result, stop);

  const accepted = await ask("/url accepted", { action: "accept" }, "end_turn");
  const flow = accepted.question.params.elicitationId;
  // The SDK may run the app's notification handler after the session's update queue got the idle.
  await waitFor(() => completed.length > 0, "the elicitation/complete handler");
  check(isDeepStrictEqual(completed, [{ elicitationId: flow }]), "/url accepted: elicitation/complete", completed);
  const completeEntry = agentMessages().find((e) => e.message.method === "elicitation/complete");
  const [answerEntry] = clientAnswersTo(accepted.question.requestId);
  check(answerEntry.seq < completeEntry.seq, "/url accepted: elicitation/complete before the answer");

  const declined = await ask("/url declined", { action: "decline" }, "end_turn");
  const dismissed = await ask("/url answered cancel", { action: "cancel" }, "cancelled");
  const label = "/url + session/cancel";
  const cancelled = await askCancelled(ctx, desk, session, label, "/url", urlQuestion(session, label, seen));
  check(completed.length === 1, "elicitation/complete for a flow that was not accepted", completed);
  const brief = (r) => ({ states: r.states, said: r.said, stopReason: r.stopReason });
  return {
    accepted: { ...brief(accepted), completed: completed.map((c) => c.elicitationId === flow) },
    declined: brief(declined),
    dismissed: brief(dismissed),
    cancelled: { states: cancelled.states, withdrawals: cancelled.withdrawals, stopReason: cancelled.stopReason },
  };
}

/** `/url`, then `session/close` while it waits: the question is withdrawn and the turn ends before the answer. */
async function closeWhileAsking(ctx, session) {
  const label = "/url + session/close";
  const { question } = await askAndWait(desk, session, label, "/url", urlQuestion(session, label, new Set()));
  setStep(`${label}: session/close`);
  const closed = await ctx.request("session/close", { sessionId: session.sessionId });
  check(isDeepStrictEqual(closed, {}), "session/close: result is not {}", closed);
  const closeAnswer = responseTo(lastClientRequest("session/close"));
  await question.withdrawal;
  const [withdrawal] = withdrawalsOf(question.requestId);
  const idle = agentMessages().findLast(
    (e) => e.message.method === "session/update" && e.message.params?.update?.stopReason === "cancelled",
  );
  check(withdrawal && withdrawal.seq < closeAnswer.seq, `${label}: the question was not withdrawn before the answer`);
  check(
    idle && idle.seq > question.wireEntry.seq && idle.seq < closeAnswer.seq,
    `${label}: no idle cancelled between the question and the close answer`,
  );
  return { result: closed, withdrawn: question.withdrawn };
}

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: CLIENT_NAME, version: "0.0.0" },
    capabilities: { elicitation: { url: {} } },
  });
  check(init.protocolVersion === 2, "initialize: protocolVersion is not 2", init);
  check(init.info?.name === EXPECTED_AGENT_NAME, `initialize: info.name is not ${EXPECTED_AGENT_NAME}`, init);

  const extensions = await extensionsFromTheClient(ctx);

  setStep("session/new with _meta");
  const session = await ctx.buildSession({ cwd: process.cwd(), _meta: { trace: "new-1" } }).start();
  sessionsCreated.add(session.sessionId);
  check(
    isDeepStrictEqual(lastClientRequest("session/new").message.params._meta, { trace: "new-1" }),
    "session/new: the SDK did not send the _meta",
  );

  const pings = JSON.parse(saidIn(await promptTurn(session, "/pings", "/pings"), "/pings"));
  const metaSeen = await meta(ctx, session, "/meta");
  setStep("session/resume with _meta");
  const resumed = await ctx.request("session/resume", { sessionId: session.sessionId, cwd: process.cwd(), _meta: { trace: "resume-1" } });
  check(resumed !== null && typeof resumed === "object", "session/resume: bad result", resumed);
  await readUntil(session, (_, message) => message.kind === "stop"); // the resume snapshot (R39), already queued
  const afterResume = await meta(ctx, session, "/meta after session/resume");
  const called = await calls(ctx, session);
  const url = await urlQuestions(ctx, session);

  const closing = await closeWhileAsking(ctx, session);
  session.dispose();
  return {
    agent: init.info,
    extensions: { ...extensions, pings },
    meta: { ...metaSeen, afterResume: afterResume.seen },
    calls: called,
    url,
    close: closing,
  };
}

/** Checks over the whole wire log, once the agent has exited and its stdout is fully read. */
function checkWire() {
  checkResponses({ noStrayResponses: true });
  checkEveryQuestionAnswered(desk);
  for (const { requestId } of slowCalls) {
    check(clientAnswersTo(requestId).length === 1, "a withdrawn _test/slow call did not get exactly one answer");
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
