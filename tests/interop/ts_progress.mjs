// The official TypeScript SDK client's onprogress against the bash daemon, and its cancel (an AbortSignal,
// which the SDK turns into notifications/cancelled).
//
// Usage: node ts_progress.mjs MCP_URL NODE_MODULES_DIR
// Prints one JSON object on stdout; tests/interop/test_ts_client.py asserts on it.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, nodeModules] = process.argv.slice(2);
const require = createRequire(join(nodeModules, 'resolver.cjs'));
const load = async (spec) => import(pathToFileURL(require.resolve(spec)).href);
const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');

const client = new Client({ name: 'hive-interop-ts-progress', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const out = { progress: [], cancelled: null };

const ticking = 'for i in 1 2 3 4 5 6; do echo "step $i of 6"; sleep 1; done';
out.result = await client.callTool({ name: 'run', arguments: { cmd: ticking, wait_seconds: 3 } }, undefined,
  { onprogress: (p) => out.progress.push(p) });

const abort = new AbortController();
try {
  await client.callTool({ name: 'run', arguments: { cmd: 'echo a; sleep 30', name: 'long', wait_seconds: 30 } }, undefined,
    { signal: abort.signal, onprogress: () => abort.abort('enough') });
} catch (err) {
  out.cancelled = String(err?.message ?? err);
}
// One wait slot: a later wait waits (is not `busy`) once the daemon has the cancel (a separate POST the SDK
// sends without awaiting it), so it may take a few tries; a slot kept to the window's end (30 s) fails here.
const started = Date.now();
const text = async (args) => (await client.callTool({ name: 'status', arguments: args })).content[0].text;
while ((await text({ id: 'long', wait_seconds: 0.2 })).includes('busy') && Date.now() - started < 5000) { /* again */ }
out.again = await client.callTool({ name: 'run', arguments: { cmd: 'sleep 0.5; echo second', wait_seconds: 10 } });
out.againMs = Date.now() - started;
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
