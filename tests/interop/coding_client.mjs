#!/usr/bin/env node
// Drives examples/coding_agent.py (pydantic-ai behind acp_agent.integrations.pydantic_ai, its offline model) with
// the official ACP TypeScript SDK (experimental v2 client API).
//
//   node tests/interop/coding_client.mjs <python> <path/to/examples/coding_agent.py>
//
// Scenario, in the directory ACP_INTEROP_CWD (which holds a.txt = "one\n"): `initialize`; `session/new` offers
// the `model` config option and the slash commands; a plain prompt streams a reply; `edit a.txt: one => two`
// asks `session/request_permission` while its tool call is `pending` and the session `requires_action`, and
// (allowed once) edits the file with a diff; `run touch ran` is rejected and the model is told; `research two`
// runs a subagent (a child session); `/model offline` answers with the option; a last prompt shows the model
// kept the whole conversation. Exit 0 and a one-line JSON summary on stdout on success; exit 1 with a message on
// stderr on any failed check, any error the SDK reports, or a timeout. ACP_INTEROP_WIRE receives both directions.

import process from "node:process";
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
  responseTo,
  run,
  setStep,
  setup,
} from "./harness.mjs";
import {
  agentTexts,
  askAndWait,
  checkEveryQuestionAnswered,
  isState,
  promptTurn,
  QuestionDesk,
  readUntilStop,
  statesIn,
} from "./questions.mjs";

const OVERALL_TIMEOUT_MS = 60_000;
const CWD = process.env.ACP_INTEROP_CWD;

await setup({
  name: "coding_client",
  usage: "usage: node coding_client.mjs <python> <path/to/coding_agent.py>",
  wireEnv: true,
  describeZodErrors: true,
});

const sessionsCreated = new Set();
const desk = new QuestionDesk();

const app = client({ name: "acp-agent-interop-coding" })
  .onRequest("session/request_permission", desk.handler)
  .onRequest("*", refuseRequest)
  .onNotification("session/update", () => {})
  .onNotification("*", refuseNotification);

/** The tool calls of `updates`, patched in order, by id. */
function toolCalls(updates) {
  const calls = new Map();
  for (const update of updates) {
    if (update.sessionUpdate === "tool_call_update") {
      calls.set(update.toolCallId, { ...(calls.get(update.toolCallId) ?? {}), ...update });
    } else if (update.sessionUpdate === "tool_call_content_chunk") {
      const call = calls.get(update.toolCallId) ?? {};
      calls.set(update.toolCallId, { ...call, content: [...(call.content ?? []), update.content] });
    }
  }
  return [...calls.values()];
}

/** A prompt whose tool asks permission; answered with `optionId`, the turn must end end_turn. */
async function approval(session, label, prompt, optionId) {
  const { question, toBlocked } = await askAndWait(desk, session, label, prompt, (q) => {
    check(q.params.sessionId === session.sessionId, `${label}: permission for another session`, q.params);
    const kinds = q.params.options.map((o) => o.kind);
    check(isDeepStrictEqual(kinds, ["allow_once", "allow_always", "reject_once", "reject_always"]),
      `${label}: options`, q.params.options);
  });
  const [pending] = toolCalls(toBlocked);
  check(pending?.status === "pending", `${label}: the tool call is not pending while the user is asked`, toBlocked);
  setStep(`${label}: answer ${optionId}`);
  question.answer({ outcome: { outcome: "selected", optionId } });
  const after = await readUntilStop(session);
  check(after.at(-1).stopReason === "end_turn", `${label}: the turn did not end end_turn`, after.at(-1));
  const [call] = toolCalls([...toBlocked, ...after]);
  return { call, said: agentTexts(after), states: statesIn([...toBlocked, ...after]) };
}

async function scenario(ctx) {
  setStep("initialize");
  const init = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-agent-interop-coding", version: "0.0.0" },
    capabilities: {},
  });
  check(init.info?.name === "coding-agent", "initialize: info.name is not coding-agent", init);

  setStep("session/new");
  const session = await ctx.buildSession(CWD).start();
  sessionsCreated.add(session.sessionId);
  const created = responseTo(lastClientRequest("session/new")).message.result;
  const model = (created.configOptions ?? []).find((o) => o.configId === "model");
  check(model?.category === "model" && model.options.some((o) => o.value === "offline"), "no model option", created);
  const commands = (created.availableCommands ?? []).map((c) => c.name);
  check(["clear", "model", "explain"].every((c) => commands.includes(c)), "slash commands", created);

  const hello = agentTexts(await promptTurn(session, "plain prompt", "hello"));
  const edit = await approval(session, "edit allowed", "edit a.txt: one => two", "allow_once");
  check(edit.call.status === "completed" && edit.call.kind === "edit", "edit: tool call", edit.call);
  const diff = (edit.call.content ?? []).find((c) => c.type === "diff");
  check(diff?.changes?.[0]?.operation === "modify" && diff.patch.text.includes("+two"), "edit: no diff", edit.call);
  const rejected = await approval(session, "run rejected", "run touch ran", "reject_once");
  check(rejected.call.status === "failed", "run rejected: the tool call did not fail", rejected.call);

  const research = await promptTurn(session, "research subagent", "research two");
  const children = research.filter((u) => u.sessionUpdate === "subagent_update").map((u) => u.sessionId);
  check(children.length > 0, "research: no subagent was announced", research);

  const switched = await promptTurn(session, "/model offline", "/model offline");
  const last = agentTexts(await promptTurn(session, "history", "how many"));
  session.dispose();
  return {
    agent: init.info,
    models: model.options.map((o) => o.value),
    commands,
    hello,
    edit: { said: edit.said, states: edit.states, kind: edit.call.kind, locations: edit.call.locations },
    rejected: { said: rejected.said, status: rejected.call.status },
    research: { said: agentTexts(research), children: [...new Set(children)].length },
    model: agentTexts(switched),
    last,
    stateOk: research.some(isState("running")),
  };
}

process.exit(
  await run({
    app,
    scenario,
    timeoutMs: OVERALL_TIMEOUT_MS,
    checkWire: () => {
      checkResponses({ noStrayResponses: true });
      checkEveryQuestionAnswered(desk);
    },
    summary: (result, exit) => ({
      ...result,
      agentExitCode: exit.code,
      messages: { agent: agentMessages().length, client: clientMessages().length },
    }),
  }),
);
