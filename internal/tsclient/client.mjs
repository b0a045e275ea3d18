// A real MCP client of the TypeScript SDK (npm @modelcontextprotocol/sdk), driven by a
// Go test one command a line on stdin, answering one JSON line each on stdout, with
// what the server sends it (progress, logs, list changes, its requests) as event
// lines in between.
//
// node client.mjs SDK_DIR http URL [PROTOCOL_VERSION]
// node client.mjs SDK_DIR stdio PROTOCOL_VERSION|"" COMMAND ARGS...
// node client.mjs SDK_DIR oauth URL CLIENT_METADATA_URL|"" REDIRECT_URL [CLIENT_ID CLIENT_SECRET]
//
// In oauth mode the client signs in with the SDK's own OAuth flow (an
// OAuthClientProvider kept in memory): when the server asks it to, it says
// {"event":"authorize","message":URL} and waits for {"op":"finish","code":CODE}, the
// code the browser brought back to REDIRECT_URL; it says {"event":"registered"} when
// it registered itself and {"event":"tokens"} each time it got tokens. With
// CLIENT_ID (and CLIENT_SECRET) it is a client registered beforehand, as at an
// identity provider that registers none itself.
//
// Commands: {"id":1,"op":"tools"}, {"op":"ping"}, {"id":2,"op":"call","name":"echo","args":{},"progress":true},
// {"id":3,"op":"start","name":"wait"} (answered at once; the call runs on),
// {"id":4,"op":"abort","ref":3} (cancels it as the SDK does: notifications/cancelled),
// {"id":7,"op":"taskCall","name":"send_email","args":{}} (a task-augmented call:
// "taskCreated" and "task" events, then its result), {"op":"getTask","taskId":T}, {"op":"taskResult","taskId":T},
// {"op":"cancelTask","taskId":T},
// {"id":5,"op":"setLevel","level":"debug"}, {"id":6,"op":"close"} (Client.close(), which
// ends no session: no DELETE).
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [sdkDir, mode, ...rest] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const types = await sdk('types.js');

const out = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');
// The SDK always asks for its newest revision; a client pinned to an older one asks
// for that in its initialize instead, as a client of that revision would.
const pin = (transport, version) => {
  if (!version) return;
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
    return send(msg, opts);
  };
};

const lines = createInterface({ input: process.stdin });
const input = lines[Symbol.asyncIterator]();

let transport;
let oauth;
let negotiated = '';
if (mode === 'oauth') {
  const [url, metadataUrl, redirect, clientId, clientSecret] = rest;
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  const { UnauthorizedError } = await sdk('client/auth.js');
  const store = clientId ? { client: { client_id: clientId, client_secret: clientSecret || undefined } } : {};
  const provider = {
    get redirectUrl() { return redirect; },
    clientMetadataUrl: metadataUrl || undefined,
    get clientMetadata() {
      return { client_name: 'ts-sdk-test', redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'], token_endpoint_auth_method: 'none' };
    },
    clientInformation: () => store.client,
    saveClientInformation: (c) => { store.client = c; out({ event: 'registered', message: c.client_id }); },
    tokens: () => store.tokens,
    saveTokens: (t) => { store.tokens = t; out({ event: 'tokens', message: t.refresh_token ? 'with refresh' : 'no refresh' }); },
    redirectToAuthorization: (u) => { store.authorize = u.toString(); },
    saveCodeVerifier: (v) => { store.verifier = v; },
    codeVerifier: () => store.verifier,
  };
  const make = () => new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  transport = make();
  oauth = { store, make, UnauthorizedError };
} else if (mode === 'http') {
  const [url, version] = rest;
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(url));
  pin(transport, version);
} else {
  const [version, command, ...args] = rest;
  const { StdioClientTransport } = await sdk('client/stdio.js');
  transport = new StdioClientTransport({ command, args, stderr: 'inherit' });
  pin(transport, version);
}
// The client tells its transport the revision initialize settled on.
const instrument = (transport) => {
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    negotiated = v;
    setVersion?.(v);
  };

  // What reaches the client's transport, before the SDK handles it: the SDK runs
  // notification handlers a microtask later than response handlers, so progress that
  // arrives in one read with the call's answer never reaches onprogress
  // (typescript-sdk#2580). Progress is reported from here too ("wire-progress").
  {
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      const inner = transport.onmessage;
      transport.onmessage = (m, extra) => {
        if (process.env.TSCLIENT_TRACE) process.stderr.write('IN ' + JSON.stringify(m) + '\n');
        if (m.method === 'notifications/progress') out({ event: 'wire-progress', progress: m.params.progress });
        return inner?.(m, extra);
      };
    };
  }
};
instrument(transport);
const client = new Client({ name: 'ts-sdk-test', version: '1' }, { capabilities: { sampling: {}, elicitation: {} } });
client.setRequestHandler(types.CreateMessageRequestSchema, async () => {
  out({ event: 'sampling' });
  return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'hi from the client' } };
});
client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
  out({ event: 'elicitation', message: req.params.message });
  return { action: 'accept', content: { ok: true } };
});
client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => out({ event: 'log', level: n.params.level }));
client.setNotificationHandler(types.ToolListChangedNotificationSchema, () => out({ event: 'changed' }));

try {
  try {
    await client.connect(transport);
  } catch (e) {
    if (!(oauth && e instanceof oauth.UnauthorizedError && oauth.store.authorize)) throw e;
    // The SDK sent the user to sign in: the test's browser brings the code back.
    out({ event: 'authorize', message: oauth.store.authorize });
    const { value } = await input.next();
    await transport.finishAuth(JSON.parse(value).code);
    transport = oauth.make();
    instrument(transport);
    await client.connect(transport);
  }
} catch (e) {
  out({ event: 'failed', error: String(e?.message ?? e) });
  process.exit(1);
}
out({ event: 'ready', protocol: negotiated || transport.protocolVersion || '', session: transport.sessionId ?? '' });

const running = new Map();
const text = (res) => (res.content?.[0]?.type === 'text' ? res.content[0].text : '');
for await (const line of { [Symbol.asyncIterator]: () => input }) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  const answer = (p) => p.then((result) => out({ id: cmd.id, result }), (e) => out({ id: cmd.id, error: String(e?.message ?? e) }));
  switch (cmd.op) {
    case 'ping':
      await answer(client.ping().then(() => 'pong'));
      break;
    case 'tools':
      await answer(client.listTools().then((r) => r.tools.map((t) => t.name)));
      break;
    case 'call': {
      const opts = cmd.progress ? { onprogress: (p) => out({ event: 'progress', progress: p.progress }) } : {};
      // Not awaited: calls may run side by side.
      answer(client.callTool({ name: cmd.name, arguments: cmd.args ?? {} }, undefined, opts).then((r) => ({
        text: text(r), isError: !!r.isError, structured: r.structuredContent ?? null,
      })));
      break;
    }
    case 'start': {
      const ac = new AbortController();
      const p = client.callTool({ name: cmd.name, arguments: cmd.args ?? {} }, undefined, { signal: ac.signal, timeout: 60000 });
      running.set(cmd.id, { ac, p });
      out({ id: cmd.id, result: 'started' });
      break;
    }
    case 'abort': {
      const r = running.get(cmd.ref);
      r.ac.abort('the test gave up');
      await answer(r.p.then(() => 'answered', (e) => 'rejected: ' + String(e?.message ?? e)));
      break;
    }
    case 'taskCall': {
      // A task-augmented tools/call (2025-11-25), followed as the SDK follows it
      // (tasks/get until the end, then tasks/result): the task made is a "taskCreated"
      // event, each it reads after a "task" event, their message the task's JSON; the
      // answer is the result, or the error.
      answer((async () => {
        const stream = client.experimental.tasks.callToolStream({ name: cmd.name, arguments: cmd.args ?? {} }, undefined, { task: { ttl: 60000 }, timeout: 120000 });
        for await (const m of stream) {
          if (m.type === 'taskCreated' || m.type === 'taskStatus') out({ event: m.type === 'taskCreated' ? 'taskCreated' : 'task', message: JSON.stringify(m.task) });
          if (m.type === 'result') return { text: text(m.result), isError: !!m.result.isError };
          if (m.type === 'error') throw m.error;
        }
        throw new Error('the task stream ended without a result');
      })());
      break;
    }
    case 'getTask':
      await answer(client.experimental.tasks.getTask(cmd.taskId));
      break;
    case 'taskResult':
      await answer(client.experimental.tasks.getTaskResult(cmd.taskId, types.CallToolResultSchema).then((r) => ({ text: text(r), isError: !!r.isError })));
      break;
    case 'cancelTask':
      await answer(client.experimental.tasks.cancelTask(cmd.taskId));
      break;
    case 'setLevel':
      await answer(client.setLoggingLevel(cmd.level).then(() => 'ok'));
      break;
    case 'close':
      await answer(client.close().then(() => 'closed'));
      process.exit(0);
  }
}
await client.close();
