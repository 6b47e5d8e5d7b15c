// A parent fanning out three children to two `agentvisor worker` processes over a real
// nats-server (Debian: apt-get install nats-server). Run: npm run build && node examples/parent-children/demo.mjs
//
// Every process it starts ends with it, even when it is killed with SIGKILL (spawnTethered,
// docs/cli.md, "Ending with the parent"): nothing is left running behind a demo that was stopped.
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadScenarios, spawnTethered, startMockLlm } from '@agentvisor/cli'

const here = path.dirname(fileURLToPath(import.meta.url))
const bin = path.join(here, '..', '..', 'packages', 'cli', 'bin', 'agentvisor.js')
// An explicit AGENTVISOR_DB (a SQLite path or a postgres:// URL) wins; else a file of its own.
const db = process.env.AGENTVISOR_DB?.trim() || path.join(here, '..', '..', '.agentvisor', 'parent-children.db')
const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
const accepts = (port) =>
  new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.once('connect', () => resolve(socket.end() && true))
    socket.once('error', () => resolve(false))
  })
const fail = (message) => {
  console.error(`demo: ${message}`)
  process.exit(1)
}

const children = []
/** Starts an agentvisor command; resolves once its stderr has a line matching `ready` (when given). */
const start = (args, name, ready) => {
  const child = spawnTethered(process.execPath, [bin, ...args], { watchesTether: true, stdio: ['ignore', 'inherit', 'pipe'] })
  children.push(child)
  let log = ''
  let isReady = ready === undefined
  return new Promise((resolve) => {
    child.stderr.on('data', (d) => {
      process.stderr.write(`${name}: ${d}`)
      log += d
      if (!isReady && ready.test(log)) {
        isReady = true
        resolve(child)
      }
    })
    child.once('exit', (code) => isReady || fail(`${name} exited ${code} before it was ready`))
    if (isReady) resolve(child)
  })
}

const port = await freePort()
const store = mkdtempSync(path.join(tmpdir(), 'agentvisor-nats-'))
const nats = `nats://127.0.0.1:${port}`
const server = spawnTethered('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store])
children.push(server)
server.once('error', () => fail('nats-server is not installed (Debian: apt-get install nats-server)'))
server.once('exit', (code) => fail(`nats-server exited ${code}`))
for (let tries = 0; !(await accepts(port)); tries++) {
  if (tries === 200) fail(`nats-server does not accept connections on 127.0.0.1:${port}`)
  await new Promise((r) => setTimeout(r, 50))
}
const mock = await startMockLlm({ scenarios: await loadScenarios(path.join(here, 'scenarios.json')), port: 4011 }).catch((error) =>
  fail(`cannot start the mock LLM on 127.0.0.1:4011 (${error.message}); is the port taken?`)
)
try {
  rmSync(path.join(here, 'ws'), { recursive: true, force: true })
  await Promise.all(
    ['worker-1', 'worker-2'].map((name) => start(['worker', '--nats', nats, '--db', db, '--concurrency', '1'], name, /agentvisor worker: serving/))
  )
  const parent = await start(['run', path.join(here, 'task.json'), '--nats', nats, '--db', db], 'parent')
  const code = parent.exitCode ?? (await new Promise((r) => parent.once('exit', r)))
  console.log(`\nparent exited ${code}; the parts are in ${path.join(here, 'ws', 'children')}/{1,2,3}/part.txt`)
  process.exitCode = code ?? 1
} finally {
  server.removeAllListeners('exit')
  const ended = children.filter((child) => child.exitCode === null && child.signalCode === null).map((child) => new Promise((r) => child.once('exit', r)))
  for (const child of children.reverse()) child.kill('SIGTERM')
  await Promise.all(ended)
  await mock.close()
  rmSync(store, { recursive: true, force: true })
}
