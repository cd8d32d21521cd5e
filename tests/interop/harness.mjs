// Shared harness for the interop clients (echo_client.mjs, background_client.mjs, subagent_client.mjs,
// login_client.mjs, surface_client.mjs): spawns the agent, wraps its stdio with the SDK's ndjson stream, logs the wire
// in both directions, makes every error the SDK reports fatal, and runs a scenario under an overall timeout, printing
// a JSON summary or a failure report.
//
// Usage: call `setup(...)` once (it parses argv, spawns the agent and installs the fatal-error hooks), build the
// client app, then `process.exit(await run(...))`. Optional environment variables:
//   ACP_INTEROP_TRANSCRIPT         file that receives every byte the agent wrote to stdout (verbatim)
//   ACP_INTEROP_CLIENT_TRANSCRIPT  file that receives every line the client SDK wrote to the agent's stdin
//   ACP_INTEROP_WIRE               (with `wireEnv`) both directions as JSON lines {"from", "message"}
//   ACP_INTEROP_URL                serve over a remote transport instead of spawning the agent: the URL of a
//                                  running `python -m acp_agent serve` (`<agent script>` is then only reported)
//   ACP_INTEROP_TRANSPORT          with ACP_INTEROP_URL: `http` (createHttpStream) or `ws` (createWebSocketStream)
//   ACP_INTEROP_TOKEN              with ACP_INTEROP_URL: a bearer token sent on every request

import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import process from "node:process";
import { format, isDeepStrictEqual } from "node:util";

import { ndJsonStream, RequestError } from "@agentclientprotocol/sdk/experimental/v2/unstable";

const EXIT_TIMEOUT_MS = 5_000;

// The SDK's own validator for session/update params (the SDK logs a failure without naming the message; this
// lets the failure report show the offending line). Same module instance the SDK uses; the version is pinned.
const { zUpdateSessionNotification } = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v2/unstable/schema/zod.gen.js", import.meta.url).href
);

/** Version of the pinned SDK package, for the summary. */
export const SDK_VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

// ---------------------------------------------------------------------------------------------------------------
// Failure handling: everything funnels into `reportError`, which makes the run fail.

/** A failed check; its message is reported as is. */
export class CheckFailed extends Error {
  name = "CheckFailed";
}

const errors = [];
let rejectFatal;
const fatal = new Promise((_, reject) => {
  rejectFatal = reject;
});
fatal.catch(() => {});
let step = "starting";
let options = { name: "client", detailedLineErrors: false, describeZodErrors: false, wireEnv: false };

/** Names the current step; failure messages are prefixed with it. */
export function setStep(name) {
  step = name;
}

/** Records an error that makes the run fail (it rejects the `fatal` promise the run races against). */
export function reportError(message) {
  const full = `[step: ${step}] ${message}`;
  errors.push(full);
  rejectFatal(new CheckFailed(full));
}

/** Throws CheckFailed with `message` (and `details`, shown as JSON) unless `condition` holds. */
export function check(condition, message, details) {
  if (!condition) {
    throw new CheckFailed(details === undefined ? message : `${message}: ${show(details)}`);
  }
}

/** JSON for a failure message, cut at 2000 characters. */
export function show(value) {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(value);
  }
}

// The strict client's fallbacks: anything the agent sends that the scenario does not expect fails the run.

/** `.onRequest("*", refuseRequest)`: a request nobody asked for is an error, answered -32601. */
export function refuseRequest({ method, params }) {
  reportError(`unexpected request from the agent: ${method} ${show(params)}`);
  throw RequestError.methodNotFound(method);
}

/** `.onNotification("*", refuseNotification)`: a notification nobody asked for is an error. */
export function refuseNotification({ method, params }) {
  reportError(`unexpected notification from the agent: ${method} ${show(params)}`);
}

/** `.onNotification("session/update", updatesOnlyFor(sessions))`: an update must name a session in `sessions`. */
export function updatesOnlyFor(sessions) {
  return ({ params }) => {
    if (!sessions.has(params.sessionId)) {
      reportError(`session/update for a session this client never opened: ${show(params)}`);
    }
  };
}

/** One-line description of an error (RequestError, ZodError when `describeZodErrors`, any Error, anything). */
export function describeError(error) {
  if (error instanceof RequestError) {
    return `RequestError ${error.code} ${error.message}${error.data === undefined ? "" : ` data=${show(error.data)}`}`;
  }
  if (options.describeZodErrors && error instanceof Error && error.name === "ZodError" && Array.isArray(error.issues)) {
    return `the SDK rejected the agent's answer as invalid: ${show(error.issues)}`;
  }
  if (error instanceof Error) {
    return `${error.name}: ${error.message}${error.issues ? ` issues=${show(error.issues)}` : ""}`;
  }
  return show(error);
}

// The SDK reports problems it cannot turn into a rejected promise -- incoming notifications whose params fail
// validation ("Error handling notification"), messages that are not JSON-RPC ("Invalid message"), responses to
// unknown request ids -- only through console.error / console.warn. Make every such report fatal.
function installFatalHooks() {
  for (const level of ["error", "warn", "log", "info", "debug"]) {
    console[level] = (...args) => reportError(`SDK reported via console.${level}: ${format(...args)}`);
  }
  process.on("unhandledRejection", (reason) => reportError(`unhandled promise rejection: ${describeError(reason)}`));
  process.on("uncaughtException", (error) => reportError(`uncaught exception: ${describeError(error)}`));
}

// ---------------------------------------------------------------------------------------------------------------
// Wire log: every message in both directions, in the order they crossed the pipe.

let seq = 0;
/** Every message, {seq, from: "agent" | "client", message}, in the order the client saw them. */
export const wire = [];
/** Wire entries the agent sent. */
export const agentMessages = () => wire.filter((entry) => entry.from === "agent");
/** Wire entries the client sent. */
export const clientMessages = () => wire.filter((entry) => entry.from === "client");

let transcriptPath;
let clientTranscriptPath;
let wirePath;

function logWire(from, message) {
  wire.push({ seq: seq++, from, message });
  if (wirePath) appendFileSync(wirePath, `${JSON.stringify({ from, message })}\n`);
}

function lineSplitter(onLine) {
  let pending = Buffer.alloc(0);
  return {
    push(chunk) {
      pending = Buffer.concat([pending, chunk]);
      let index;
      while ((index = pending.indexOf(0x0a)) !== -1) {
        onLine(pending.subarray(0, index).toString("utf8"));
        pending = pending.subarray(index + 1);
      }
    },
    flush() {
      if (pending.length > 0) {
        onLine(pending.toString("utf8"), true);
        pending = Buffer.alloc(0);
      }
    },
  };
}

function parseAgentLine(line) {
  let message;
  if (options.detailedLineErrors) {
    if (line.trim() === "") {
      reportError("agent wrote an empty line to stdout");
      return undefined;
    }
    try {
      message = JSON.parse(line);
    } catch {
      reportError(`agent wrote a line to stdout that is not JSON: ${show(line)}`);
      return undefined;
    }
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      reportError(`agent wrote a JSON value that is not a single JSON-RPC object: ${show(line)}`);
      return undefined;
    }
    if (message.jsonrpc !== "2.0") {
      reportError(`agent message without "jsonrpc": "2.0": ${show(line)}`);
    }
    return message;
  }
  try {
    message = JSON.parse(line);
  } catch {
    reportError(`agent wrote a line to stdout that is not JSON: ${show(line)}`);
    return undefined;
  }
  if (typeof message !== "object" || message === null || Array.isArray(message) || message.jsonrpc !== "2.0") {
    reportError(`agent wrote something that is not a single JSON-RPC 2.0 object: ${show(line)}`);
    return undefined;
  }
  return message;
}

function recordAgentLine(line, unterminated = false) {
  if (unterminated) reportError(`agent stdout ended with an unterminated line: ${show(line)}`);
  const message = parseAgentLine(line);
  if (message === undefined) return;
  logWire("agent", message);
  if (message.method === "session/update" && !("id" in message)) {
    const parsed = zUpdateSessionNotification.safeParse(message.params);
    if (!parsed.success) {
      reportError(`the SDK cannot parse this session/update: ${show(line)}; issues: ${show(parsed.error.issues)}`);
    }
  }
}

let expectedClientError = () => false;

/** Lets the client answer agent requests for which `predicate(agentRequest, errorResponse)` holds with an error. */
export function allowClientErrors(predicate) {
  expectedClientError = predicate;
}

function recordClientLine(line) {
  const message = JSON.parse(line);
  logWire("client", message);
  // The client SDK answers an agent message it cannot accept (invalid JSON, not JSON-RPC, a request whose params
  // fail validation, an unknown method, a throwing handler) with a JSON-RPC error. None is expected here, except
  // the ones a scenario asked for with `allowClientErrors`.
  if ("error" in message && !("method" in message) && !expectedClientError(agentRequestFor(message.id), message)) {
    reportError(`the client SDK rejected a message from the agent and answered: ${show(message)}`);
  }
}

/** The agent request (the message) with JSON-RPC id `id`, if the agent sent one. */
function agentRequestFor(id) {
  return agentMessages().find((entry) => "method" in entry.message && isDeepStrictEqual(entry.message.id, id))?.message;
}

/** The last request (with an id) the client sent for `method`. */
export function lastClientRequest(method) {
  return clientMessages().filter((entry) => entry.message.method === method && "id" in entry.message).at(-1);
}

/** The agent's response to a client request wire entry. */
export function responseTo(request) {
  return agentMessages().find(
    (entry) => !("method" in entry.message) && isDeepStrictEqual(entry.message.id, request.message.id),
  );
}

/** Every client request got exactly one response; with `noStrayResponses`, every agent response answers one. */
export function checkResponses({ noStrayResponses = false } = {}) {
  const requests = clientMessages().filter((entry) => "method" in entry.message && "id" in entry.message);
  const responses = agentMessages().filter((entry) => !("method" in entry.message));
  for (const request of requests) {
    const answers = responses.filter((entry) => isDeepStrictEqual(entry.message.id, request.message.id));
    check(answers.length === 1, `request ${request.message.method} got ${answers.length} responses`, request.message);
  }
  if (noStrayResponses) {
    for (const response of responses) {
      check(
        requests.some((entry) => isDeepStrictEqual(entry.message.id, response.message.id)),
        "response to a request the client never sent",
        response.message,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Agent process and stdio streams.

let child;
let agentExit; // {code, signal} once the process has exited and its stdio closed
let expectingExit = false;
let agentClosed;
let stream;

let remoteUrl;
let remoteWriter;

/**
 * Wraps the SDK's remote client stream (Streamable HTTP or WebSocket) so every message in both directions is
 * logged like the stdio bytes are: the agent's messages as JSON lines in ACP_INTEROP_TRANSCRIPT, the client's in
 * ACP_INTEROP_CLIENT_TRANSCRIPT, both in the wire log.
 */
async function remoteStream(url, transport) {
  const token = process.env.ACP_INTEROP_TOKEN;
  const headers = token ? { Authorization: `Bearer ${token}` } : undefined;
  let inner;
  if (transport === "ws") {
    const { createWebSocketStream } = await import("@agentclientprotocol/sdk/experimental/ws-client");
    const { WebSocket } = await import("ws");
    inner = createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket, headers });
  } else if (transport === "http") {
    const { createHttpStream } = await import("@agentclientprotocol/sdk/experimental/http-client");
    inner = createHttpStream(url, { headers });
  } else {
    process.stderr.write(`unknown ACP_INTEROP_TRANSPORT ${transport}\n`);
    process.exit(2);
  }
  const reader = inner.readable.getReader();
  remoteWriter = inner.writable.getWriter();
  const readable = new ReadableStream({
    async pull(controller) {
      let result;
      try {
        result = await reader.read();
      } catch (error) {
        if (!expectingExit) reportError(`the ${transport} stream failed: ${describeError(error)}`);
        controller.close();
        return;
      }
      if (result.done) {
        if (!expectingExit) reportError(`the ${transport} stream ended unexpectedly`);
        controller.close();
        return;
      }
      const message = result.value;
      if (transcriptPath) appendFileSync(transcriptPath, `${JSON.stringify(message)}\n`);
      recordAgentLine(JSON.stringify(message));
      controller.enqueue(message);
    },
  });
  const writable = new WritableStream({
    async write(message) {
      const line = JSON.stringify(message);
      if (clientTranscriptPath) appendFileSync(clientTranscriptPath, `${line}\n`);
      recordClientLine(line);
      await remoteWriter.write(message);
    },
  });
  return { readable, writable };
}

/**
 * Installs the fatal-error hooks, truncates the transcript files, parses `<python> <agent script>` from argv
 * (exit 2 with `usage` otherwise), spawns the agent and wraps its stdio in the SDK's ndjson stream.
 *   name                log prefix for failure reports ("echo_client")
 *   usage               usage line printed on bad arguments
 *   wireEnv             honour ACP_INTEROP_WIRE
 *   detailedLineErrors  separate messages for empty / non-object / non-2.0 agent lines
 *   describeZodErrors   describe a ZodError as the SDK rejecting the agent's answer
 */
export async function setup(config) {
  options = { ...options, ...config };
  installFatalHooks();

  transcriptPath = process.env.ACP_INTEROP_TRANSCRIPT;
  clientTranscriptPath = process.env.ACP_INTEROP_CLIENT_TRANSCRIPT;
  wirePath = options.wireEnv ? process.env.ACP_INTEROP_WIRE : undefined;
  for (const path of [transcriptPath, clientTranscriptPath, wirePath]) {
    if (path) writeFileSync(path, "");
  }

  const [, , python, agentScript] = process.argv;
  if (!python || !agentScript) {
    process.stderr.write(`${options.usage}\n`);
    process.exit(2);
  }

  remoteUrl = process.env.ACP_INTEROP_URL;
  if (remoteUrl) {
    stream = await remoteStream(remoteUrl, process.env.ACP_INTEROP_TRANSPORT ?? "http");
    return;
  }

  child = spawn(python, [agentScript], { stdio: ["pipe", "pipe", "inherit"] });
  agentClosed = new Promise((resolve) => {
    child.on("close", (code, signal) => {
      agentExit = { code, signal };
      if (!expectingExit) reportError(`agent process exited unexpectedly (code ${code}, signal ${signal})`);
      resolve(agentExit);
    });
  });
  child.on("error", (error) => reportError(`agent process error: ${describeError(error)}`));
  child.stdin.on("error", (error) => reportError(`writing to the agent's stdin failed: ${describeError(error)}`));

  const agentLines = lineSplitter(recordAgentLine);
  let inputController;
  let inputOpen = true;
  const input = new ReadableStream({
    start(controller) {
      inputController = controller;
    },
    cancel() {
      // The SDK connection closed; keep draining and logging stdout, but stop feeding the SDK.
      inputOpen = false;
    },
  });
  child.stdout.on("data", (chunk) => {
    if (transcriptPath) appendFileSync(transcriptPath, chunk);
    agentLines.push(chunk);
    if (inputOpen) inputController.enqueue(new Uint8Array(chunk));
  });
  child.stdout.on("end", () => {
    agentLines.flush();
    if (inputOpen) {
      inputOpen = false;
      inputController.close();
    }
  });

  const clientLines = lineSplitter(recordClientLine);
  const output = new WritableStream({
    write(bytes) {
      const buffer = Buffer.from(bytes);
      if (clientTranscriptPath) appendFileSync(clientTranscriptPath, buffer);
      clientLines.push(buffer);
      return new Promise((resolve, reject) => {
        child.stdin.write(buffer, (error) => (error ? reject(error) : resolve()));
      });
    },
  });
  stream = ndJsonStream(output, input);
}

/**
 * Runs `scenario` on `app` under an overall timeout, closes the agent's stdin and waits for a clean exit, runs
 * `checkWire(result)`, and prints `{ok, sdk, ...summary(result, exit)}` (stdout) or a failure report (stderr) with
 * the last `tailLength` wire messages. Returns the exit code (0 or 1); kills the agent if it is still running.
 */
export async function run({ app, scenario, timeoutMs, checkWire, summary, tailLength = 10 }) {
  const { name } = options;
  const timer = setTimeout(() => reportError(`timed out after ${timeoutMs / 1000} s`), timeoutMs);
  try {
    const result = await Promise.race([app.connectWith(stream, scenario), fatal]);

    step = "agent shutdown";
    expectingExit = true;
    if (remoteUrl) {
      // Ending the stream ends the connection (DELETE over HTTP, a close frame over WebSocket); the server lives on.
      await remoteWriter.close();
      step = "wire checks";
      checkWire(result);
      if (errors.length > 0) throw new CheckFailed(errors[0]);
      const remote = { code: 0, signal: null, transport: process.env.ACP_INTEROP_TRANSPORT ?? "http" };
      const report = { ok: true, sdk: `@agentclientprotocol/sdk@${SDK_VERSION}`, ...summary(result, remote) };
      process.stdout.write(`${JSON.stringify(report)}\n`);
      return 0;
    }
    child.stdin.end();
    const exitTimer = setTimeout(
      () => reportError(`agent did not exit within ${EXIT_TIMEOUT_MS / 1000} s after stdin was closed`),
      EXIT_TIMEOUT_MS,
    );
    const exit = await Promise.race([agentClosed, fatal]);
    clearTimeout(exitTimer);
    check(exit.code === 0 && exit.signal === null, "agent did not exit with code 0", exit);

    step = "wire checks";
    checkWire(result);
    if (errors.length > 0) throw new CheckFailed(errors[0]);

    const report = { ok: true, sdk: `@agentclientprotocol/sdk@${SDK_VERSION}`, ...summary(result, exit) };
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return 0;
  } catch (error) {
    let message = error instanceof CheckFailed ? error.message : describeError(error);
    if (!message.startsWith("[step: ")) message = `[step: ${step}] ${message}`;
    process.stderr.write(`${name}: FAILED: ${message}\n`);
    for (const extra of errors.filter((text) => text !== message)) {
      process.stderr.write(`${name}: also: ${extra}\n`);
    }
    const tail = wire.slice(-tailLength).map((entry) => `  ${entry.from}: ${show(entry.message)}`);
    if (tail.length > 0) process.stderr.write(`${name}: last messages on the wire:\n${tail.join("\n")}\n`);
    return 1;
  } finally {
    clearTimeout(timer);
    if (child !== undefined && agentExit === undefined) {
      expectingExit = true;
      child.kill("SIGKILL");
    }
  }
}
