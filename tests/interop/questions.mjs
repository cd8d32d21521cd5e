// Questions from the agent (`elicitation/create`) held open by the client until a scenario answers them, and the
// turn helpers around them, for the interop clients that drive agents which ask (login_client.mjs,
// surface_client.mjs).
//
// `desk.handler` goes into `client(...).onRequest("elicitation/create", desk.handler)`. Every request becomes a
// `Question` queued in arrival order; the scenario takes it with `await desk.next()`, inspects it, and settles it
// with `question.answer(result)`. When the agent withdraws the request with `$/cancel_request`, the SDK aborts the
// handler's signal: the question is marked withdrawn and answered `{action: "cancel"}`, as a client that closed the
// dialog would.

import { isDeepStrictEqual } from "node:util";

import { RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

import { agentMessages, check, CheckFailed, clientMessages, describeError, setStep } from "./harness.mjs";

const NEVER_SETTLED = Symbol("pending");

/** One `elicitation/create` request the client holds. */
class Question {
  constructor(params, requestId, signal, resolve) {
    this.params = params;
    this.requestId = requestId;
    this.answered = false;
    this.withdrawn = false;
    this.result = NEVER_SETTLED;
    this.resolveHandler = resolve;
    this.withdrawal = new Promise((resolveWithdrawal) => {
      const onAbort = () => {
        if (this.answered) return;
        this.withdrawn = true;
        this.settle({ action: "cancel" });
        resolveWithdrawal();
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Whether the client still holds it (neither answered by the scenario nor withdrawn by the agent). */
  get pending() {
    return this.result === NEVER_SETTLED;
  }

  /** The wire entry of the request itself (for ordering checks). */
  get wireEntry() {
    return agentMessages().find(
      (entry) => entry.message.method === "elicitation/create" && isDeepStrictEqual(entry.message.id, this.requestId),
    );
  }

  settle(result) {
    if (!this.pending) return;
    this.result = result;
    this.resolveHandler(result);
  }

  /** Answers it with `result` (a `CreateElicitationResponse`). */
  answer(result) {
    check(this.pending, "answering a question that is no longer pending", { params: this.params, withdrawn: this.withdrawn });
    this.answered = true;
    this.settle(result);
  }
}

/** A queue of the agent's questions; see the module comment. */
export class QuestionDesk {
  constructor() {
    this.questions = [];
    this.taken = 0;
    this.waiting = [];
    this.handler = ({ params, requestId, signal }) =>
      new Promise((resolve) => {
        const question = new Question(params, requestId, signal, resolve);
        this.questions.push(question);
        for (const wake of this.waiting.splice(0)) wake();
      });
  }

  /** The next question not taken yet, waiting for it to arrive. */
  async next() {
    while (this.questions.length <= this.taken) {
      await new Promise((resolve) => this.waiting.push(resolve));
    }
    return this.questions[this.taken++];
  }

  /** Questions that arrived but were not taken by `next()`. */
  get untaken() {
    return this.questions.slice(this.taken);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Turn helpers.

/** The state of the latest `state_update` for `sessionId` the client received (from the wire log). */
export function lastStateOnWire(sessionId) {
  const entry = agentMessages().findLast(
    (e) =>
      e.message.method === "session/update" &&
      e.message.params?.sessionId === sessionId &&
      e.message.params.update?.sessionUpdate === "state_update",
  );
  return entry?.message.params.update.state;
}

/** Waits until `condition()` holds (polling), or fails after `timeoutMs` naming `what`. */
export async function waitFor(condition, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new CheckFailed(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function settle(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

/** Awaits `promise`, which must reject with a RequestError of `code`; returns the code. */
export async function rejectsWith(promise, code, label) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof RequestError && error.code === code, `${label}: expected error ${code}`, describeError(error));
    return error.code;
  }
  throw new CheckFailed(`${label}: the agent accepted it, expected error ${code}`);
}

/** Reads session updates until `done(update, message)` holds; returns every update read, the matching one last. */
export async function readUntil(session, done) {
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    updates.push(message.update);
    if (done(message.update, message)) return updates;
  }
}

/** Reads up to the idle snapshot that carries a stop reason. */
export const readUntilStop = (session) =>
  readUntil(session, (_, message) => message.kind === "stop" && message.stopReason != null);

export const isState = (state) => (update) => update.sessionUpdate === "state_update" && update.state === state;
export const statesIn = (updates) => updates.filter((u) => u.sessionUpdate === "state_update").map((u) => u.state);
export const isAgentOutput = (update) =>
  ["agent_message", "agent_message_chunk", "agent_thought", "agent_thought_chunk"].includes(update.sessionUpdate);

/** The agent's message text in `updates` (full messages replace, chunks append), by messageId, in order. */
export function agentTexts(updates) {
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
export function withdrawalsOf(requestId) {
  return agentMessages().filter(
    (entry) =>
      entry.message.method === "$/cancel_request" && isDeepStrictEqual(entry.message.params?.requestId, requestId),
  );
}

/** The client's answers (responses) to the agent's request `requestId`. */
export function clientAnswersTo(requestId) {
  return clientMessages().filter((e) => !("method" in e.message) && isDeepStrictEqual(e.message.id, requestId));
}

/** Sends `text` and reads the whole turn (which must end `expectedStop`). */
export async function promptTurn(session, label, text, expectedStop = "end_turn") {
  setStep(label);
  const [response, updates] = await Promise.all([session.prompt(text), readUntilStop(session)]);
  check(typeof response.messageId === "string", `${label}: bad prompt response`, response);
  const stop = updates.at(-1);
  check(stop.stopReason === expectedStop, `${label}: the turn did not end ${expectedStop}`, stop);
  return updates;
}

/**
 * Prompts `prompt` and reads up to the `requires_action` snapshot and the question the foreground waits on
 * (`checkQuestion(question)` judges it); checks that the client sees `requires_action` while it is pending.
 */
export async function askAndWait(desk, session, label, prompt, checkQuestion) {
  setStep(`${label}: ${prompt}`);
  const sent = settle(session.prompt(prompt));
  const toBlocked = await readUntil(session, isState("requires_action"));
  const question = await desk.next();
  checkQuestion(question);
  check(question.pending, `${label}: the question is not pending`);
  // (The wire log is written as the bytes arrive; the SDK may run the app's notification handlers later.)
  check(
    lastStateOnWire(session.sessionId) === "requires_action",
    `${label}: the client does not see requires_action while the question waits`,
    { state: lastStateOnWire(session.sessionId) },
  );
  check(isDeepStrictEqual(statesIn(toBlocked), ["running", "requires_action"]), `${label}: states before it`, toBlocked);
  const response = await sent;
  if (!response.ok) throw response.error;
  check(typeof response.value.messageId === "string", `${label}: bad prompt response`, response.value);
  return { question, toBlocked };
}

/** A question answered with `result`: `running` again, then the turn ends `expectedStop`. */
export async function askAnswered(desk, session, label, prompt, checkQuestion, result, expectedStop) {
  const { question, toBlocked } = await askAndWait(desk, session, label, prompt, checkQuestion);
  setStep(`${label}: answer ${result.action}`);
  question.answer(result);
  const after = await readUntilStop(session);
  const stop = after.at(-1);
  check(stop.stopReason === expectedStop, `${label}: the turn did not end ${expectedStop}`, stop);
  check(isDeepStrictEqual(statesIn(after), ["running", "idle"]), `${label}: states after the answer`, after);
  const resumed = after.findIndex(isState("running"));
  check(!after.slice(0, resumed).some(isAgentOutput), `${label}: agent output while requires_action`, after);
  check(withdrawalsOf(question.requestId).length === 0, `${label}: the answered question was withdrawn`);
  return { question, after, states: statesIn([...toBlocked, ...after]), said: agentTexts(after), stopReason: stop.stopReason };
}

/** A question, then `session/cancel` while it waits: the agent withdraws it and ends idle cancelled. */
export async function askCancelled(ctx, desk, session, label, prompt, checkQuestion) {
  const { question, toBlocked } = await askAndWait(desk, session, label, prompt, checkQuestion);
  setStep(`${label}: session/cancel`);
  await ctx.notify("session/cancel", { sessionId: session.sessionId });
  const cancelEntry = clientMessages().findLast((e) => e.message.method === "session/cancel");
  const after = await readUntilStop(session);
  const stop = after.at(-1);
  check(stop.stopReason === "cancelled", `${label}: the turn did not end cancelled`, stop);
  await question.withdrawal;
  check(question.withdrawn && !question.answered, `${label}: the question was not withdrawn`);
  const withdrawals = withdrawalsOf(question.requestId);
  check(withdrawals.length === 1, `${label}: expected one $/cancel_request for the question`, withdrawals);
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
    question,
    states: statesIn([...toBlocked, ...after]),
    withdrawn: question.withdrawn,
    withdrawals: withdrawals.length,
    stopReason: stop.stopReason,
  };
}

/** Every question was answered by the client exactly once (withdrawn ones with `cancel`). */
export function checkEveryQuestionAnswered(desk) {
  for (const question of desk.questions) {
    const answers = clientAnswersTo(question.requestId);
    check(answers.length === 1, "a question did not get exactly one answer", { params: question.params, answers });
  }
  check(desk.untaken.length === 0, "questions the scenario never took", desk.untaken.map((q) => q.params));
}
