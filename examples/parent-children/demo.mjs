// A parent fanning out three children to two `agentvisor worker` processes over a real
// nats-server (Debian: apt-get install nats-server). Run: npm run build && node examples/parent-children/demo.mjs
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadScenarios, startMockLlm } from '@agentvisor/cli'

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

const children = []
const start = (command, args, name) => {
  const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'pipe'] })
  child.stderr.on('data', (d) => process.stderr.write(`${name}: ${d}`))
  children.push(child)
  return child
}

const port = await freePort()
const store = mkdtempSync(path.join(tmpdir(), 'agentvisor-nats-'))
const nats = `nats://127.0.0.1:${port}`
const server = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store], { stdio: 'ignore' })
children.push(server)
server.once('error', () => {
  console.error('demo: nats-server is not installed (Debian: apt-get install nats-server)')
  process.exit(1)
})
await new Promise((r) => setTimeout(r, 500))
const mock = await startMockLlm({ scenarios: await loadScenarios(path.join(here, 'scenarios.json')), port: 4011 })
try {
  rmSync(path.join(here, 'ws'), { recursive: true, force: true })
  for (const name of ['worker-1', 'worker-2']) start(process.execPath, [bin, 'worker', '--nats', nats, '--db', db, '--concurrency', '1'], name)
  await new Promise((r) => setTimeout(r, 1500))
  const parent = start(process.execPath, [bin, 'run', path.join(here, 'task.json'), '--nats', nats, '--db', db], 'parent')
  const code = await new Promise((r) => parent.once('exit', r))
  console.log(`\nparent exited ${code}; the parts are in ${path.join(here, 'ws', 'children')}/{1,2,3}/part.txt`)
  process.exitCode = code ?? 1
} finally {
  for (const child of children.reverse()) child.kill('SIGTERM')
  await mock.close()
  await new Promise((r) => setTimeout(r, 300))
  rmSync(store, { recursive: true, force: true })
}
