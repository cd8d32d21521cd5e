// Questions from the agent (`elicitation/create`) held open by the client until a scenario answers them, for the
// interop clients that drive agents which ask (login_client.mjs, surface_client.mjs).
//
// `desk.handler` goes into `client(...).onRequest("elicitation/create", desk.handler)`. Every request becomes a
// `Question` queued in arrival order; the scenario takes it with `await desk.next()`, inspects it, and settles it
// with `question.answer(result)`. When the agent withdraws the request with `$/cancel_request`, the SDK aborts the
// handler's signal: the question is marked withdrawn and answered `{action: "cancel"}`, as a client that closed the
// dialog would.

import { isDeepStrictEqual } from "node:util";

import { agentMessages, check } from "./harness.mjs";

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
