import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { onTestFinished } from 'vitest'
import { openStore, type NewAttempt, type NewRun, type NewStep, type NewTransition, type Store } from '@agentvisor/store'

/** A fresh folder for this test, removed when it finishes. */
export function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agentvisor-store-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A store on a real SQLite file in a fresh folder, closed (then deleted) when the test finishes. */
export async function tempStore(): Promise<Store> {
  const dir = mkdtempSync(path.join(tmpdir(), 'agentvisor-store-'))
  const store = await openStore(path.join(dir, 'agentvisor.db'))
  onTestFinished(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return store
}

export const run = (overrides: Partial<NewRun> = {}): NewRun => ({
  id: 'run-1',
  parent_id: null,
  status: 'running',
  goal: 'Write DONE into out.txt',
  contract_json: JSON.stringify({ goal: 'Write DONE into out.txt', providers: [{ apiKeyEnv: 'OPENAI_API_KEY' }] }),
  state: 'dispatching',
  created_at: '2026-11-29T12:00:00.000Z',
  updated_at: '2026-11-29T12:00:00.000Z',
  ...overrides
})

export const transition = (overrides: Partial<NewTransition> = {}): NewTransition => ({
  run_id: 'run-1',
  seq: 1,
  from_state: 'dispatching',
  event: 'PROVIDER_OK',
  to_state: 'acting',
  snapshot_json: '{"value":"acting"}',
  at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

export const step = (overrides: Partial<NewStep> = {}): NewStep => ({
  run_id: 'run-1',
  step: 1,
  provider: 'primary',
  at: '2026-11-29T12:00:01.000Z',
  ...overrides
})

export const attempt = (overrides: Partial<NewAttempt> = {}): NewAttempt => ({
  run_id: 'run-1',
  step: 1,
  attempt: 0,
  provider: 'primary',
  reason: 'initial',
  started_at: '2026-11-29T12:00:00.500Z',
  ...overrides
})
