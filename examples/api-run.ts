// Starting a run from TypeScript, without the CLI. Run it with: npx tsx examples/api-run.ts
import { rmSync } from 'node:fs'
import * as path from 'node:path'
import { pathToFileURL } from 'node:url'
import { Agentvisor, type RunResult } from '@agentvisor/actors'
import { loadScenarios, startMockLlm } from '@agentvisor/cli'

/** Runs the single-agent task through the TS API against an OpenAI-compatible server at `baseUrl`. */
export async function runWithApi(options: { db: string; baseUrl: string; workspace: string }): Promise<RunResult> {
  const av = await Agentvisor.open({ db: options.db })
  try {
    return await av.run({
      goal: 'Write DONE into out.txt',
      workspace: options.workspace,
      providers: [{ name: 'primary', kind: 'openai', baseUrl: options.baseUrl, model: 'demo-model' }],
      verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
      limits: { maxSteps: 6 },
      // Writes and commands no rule allows would wait for a person (`approval: 'defer'`).
      policy: { layers: [{ name: 'team', allow: { write: ['notes/**', 'out.txt'], exec: ['cat *', 'wc *'] } }] },
      approval: 'defer'
    })
  } finally {
    await av.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const here = path.dirname(new URL(import.meta.url).pathname)
  // A fresh workspace each time, so the run does its three steps again.
  rmSync(path.join(here, 'single-agent', 'ws'), { recursive: true, force: true })
  const mock = await startMockLlm({ scenarios: await loadScenarios(path.join(here, 'single-agent', 'scenarios.json')) })
  try {
    // An explicit AGENTVISOR_DB (a SQLite path or a postgres:// URL) wins, as for the CLI.
    const db = process.env['AGENTVISOR_DB']?.trim() || '.agentvisor/agentvisor.db'
    const result = await runWithApi({ db, baseUrl: mock.url, workspace: path.join(here, 'single-agent', 'ws') })
    console.log(result)
  } finally {
    await mock.close()
  }
}
