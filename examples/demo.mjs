// The README's first command: runs examples/single-agent (or the example named as its argument:
// `node examples/demo.mjs agents`) against the bundled mock LLM on the embedded defaults (SQLite
// under .agentvisor/, in-process, no API key), then prints its trace.
import { readFileSync, rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import * as path from 'node:path'
import { loadScenarios, spawnTethered, startMockLlm } from '@agentvisor/cli'
import { redactPassword } from '@agentvisor/store'

const here = path.dirname(fileURLToPath(import.meta.url))
const example = path.join(here, process.argv[2] ?? 'single-agent')
const bin = path.join(here, '..', 'packages', 'cli', 'bin', 'agentvisor.js')
// The mock LLM listens where the example's task sends its requests.
const port = Number(new URL(JSON.parse(readFileSync(path.join(example, 'task.json'), 'utf8')).providers[0].baseUrl).port)

const mock = await startMockLlm({ scenarios: await loadScenarios(path.join(example, 'scenarios.json')), port }).catch((error) => {
  console.error(`demo: cannot start the mock LLM on 127.0.0.1:${port} (${error.message}); is the port taken?`)
  process.exit(1)
})
try {
  // A fresh workspace each time, so the run visibly creates its files.
  rmSync(path.join(example, 'ws'), { recursive: true, force: true })
  // Asynchronous on purpose: the mock LLM answers from this very process. Tethered: the command
  // ends with this script, even a SIGKILLed one (docs/cli.md, "Ending with the parent").
  const agentvisor = (...args) =>
    new Promise((resolve, reject) => {
      const child = spawnTethered(process.execPath, [bin, ...args], { watchesTether: true, stdio: ['ignore', 'pipe', 'inherit'] })
      let stdout = ''
      child.stdout.on('data', (chunk) => (stdout += chunk))
      child.once('error', reject)
      child.once('close', (status) => resolve({ status, stdout }))
    })
  const run = await agentvisor('run', path.join(example, 'task.json'), '--json')
  const result = JSON.parse(run.stdout.trim().split('\n').at(-1))
  console.log(`\nresult: ${JSON.stringify(result)}\n`)
  const show = await agentvisor('show', result.runId)
  process.stdout.write(show.stdout)
  // AGENTVISOR_DB (a file or a postgres:// URL) picks another store; its password is never printed.
  const store = process.env.AGENTVISOR_DB?.trim() ? redactPassword(process.env.AGENTVISOR_DB.trim()) : '.agentvisor/agentvisor.db'
  console.log(`\nThe workspace is ${path.join(example, 'ws')}; the store is ${store}.`)
  console.log(`Try: npx agentvisor runs   |   npx agentvisor show ${result.runId} --json`)
  process.exitCode = run.status ?? 1
} finally {
  await mock.close()
}
