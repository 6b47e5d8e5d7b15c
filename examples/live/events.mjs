// A run's events as they happen, through the TypeScript API (docs/streaming.md): the model's
// text as it streams, each tool call, the usage after each answer, and the end. The task keeps
// the run inside a token and dollar budget and its prompt under 1,500 tokens (docs/task-file.md):
// the reports it reads are long, so the oldest are elided from later requests.
//
//   node examples/live/events.mjs
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agentvisor } from '@agentvisor/actors'
import { loadScenarios, startMockLlm } from '@agentvisor/cli'

const here = path.dirname(fileURLToPath(import.meta.url))
const task = JSON.parse((await import('node:fs')).readFileSync(path.join(here, 'task.json'), 'utf8'))
const port = Number(new URL(task.providers[0].baseUrl).port)

// A fresh workspace with three long reports.
const ws = path.join(here, 'ws')
rmSync(ws, { recursive: true, force: true })
mkdirSync(path.join(ws, 'reports'), { recursive: true })
for (const name of ['alpha', 'beta', 'gamma']) {
  writeFileSync(path.join(ws, 'reports', `${name}.md`), `# ${name}\n\n${`Notes on ${name}, line after line. `.repeat(80)}\n`)
}

const mock = await startMockLlm({ scenarios: await loadScenarios(path.join(here, 'scenarios.json')), port })
const av = await Agentvisor.open({ db: process.env.AGENTVISOR_DB?.trim() || '.agentvisor/agentvisor.db', telemetry: false })
try {
  const run = await av.start({ ...task, workspace: ws })
  let speaking = false
  for await (const event of run.events()) {
    if (event.kind === 'text') {
      if (!speaking) process.stdout.write('model: ')
      speaking = true
      process.stdout.write(event.delta)
      continue
    }
    if (speaking) process.stdout.write('\n')
    speaking = false
    if (event.kind === 'toolCall') console.log(`  -> ${event.name} ${JSON.stringify(event.arguments).slice(0, 70)}`)
    if (event.kind === 'usage') console.log(`     ${event.usage.inputTokens + event.usage.outputTokens} tokens so far, $${event.usage.costUsd}`)
    if (event.kind === 'done')
      console.log(`done: ${event.status} after ${event.steps} steps, ${JSON.stringify(event.usage)}\noutput: ${JSON.stringify(event.output)}`)
  }
  const result = await run.result
  console.log(`\nTry: npx agentvisor show ${result.runId}   (each step's prompt summary says what was elided)`)
  process.exitCode = result.status === 'succeeded' ? 0 : 1
} finally {
  await av.close()
  await mock.close()
}
