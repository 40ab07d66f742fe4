// The official TypeScript SDK client (@modelcontextprotocol/sdk) against one of our daemons.
//
// Usage: node ts_client.mjs MCP_URL NODE_MODULES_DIR
// Prints one JSON object on stdout describing what the client saw; tests/interop/test_ts_client.py asserts on it.
// The SDK is resolved from NODE_MODULES_DIR (the repo's .cache/npm/node_modules, installed by scripts/test):
// node's ESM loader ignores NODE_PATH, so we resolve through createRequire and import the resolved file.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, nodeModules] = process.argv.slice(2);
if (!url || !nodeModules) {
  console.error('usage: node ts_client.mjs MCP_URL NODE_MODULES_DIR');
  process.exit(2);
}
const require = createRequire(join(nodeModules, 'resolver.cjs'));
const load = async (spec) => import(pathToFileURL(require.resolve(spec)).href);
const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');
// Not require('.../package.json'): the SDK's export map sends that to dist/cjs/package.json, which has no version.
const sdkVersion = JSON.parse(readFileSync(join(nodeModules, '@modelcontextprotocol/sdk/package.json'), 'utf8')).version;

// Every HTTP exchange the transport makes, so the test can check methods and statuses (GET -> 405, DELETE -> 2xx).
const http = [];
const recordingFetch = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  let rpc = null;
  try { rpc = typeof init.body === 'string' ? JSON.parse(init.body).method ?? 'response' : null; } catch { rpc = 'unparsable'; }
  const response = await fetch(input, init);
  http.push({ method: init.method ?? 'GET', rpc, status: response.status, accept: headers.get('accept'),
              protocolVersion: headers.get('mcp-protocol-version') });
  return response;
};

const errors = [];
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
const client = new Client({ name: 'hive-interop-ts', version: '1.0.0' });
client.onerror = (err) => errors.push(String(err));

const out = { sdkVersion, http, errors };
await client.connect(transport);
out.protocolVersion = transport.protocolVersion ?? null;
out.sessionId = transport.sessionId ?? null;
out.serverInfo = client.getServerVersion() ?? null;
out.capabilities = client.getServerCapabilities() ?? null;
out.tools = (await client.listTools()).tools;
out.echo = await client.callTool({ name: 'echo', arguments: { text: 'hi', times: 2 } });
out.refuse = await client.callTool({ name: 'refuse', arguments: {} });
out.badArgs = await client.callTool({ name: 'echo', arguments: { text: 7 } });
try {
  out.unknown = { result: await client.callTool({ name: 'no-such-tool', arguments: {} }) };
} catch (err) {
  out.unknown = { error: { name: err?.constructor?.name, code: err?.code, message: String(err?.message ?? err) } };
}
await transport.terminateSession();
out.sessionIdAfterTerminate = transport.sessionId ?? null;
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
