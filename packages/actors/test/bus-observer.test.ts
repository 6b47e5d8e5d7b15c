import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Exit, Scope } from 'effect'
import { afterEach, describe, expect, it } from 'vitest'
import { Agentvisor, makeInProcessBus, type RunDoneMessage } from '@agentvisor/actors'

let dir: string | undefined
let av: Agentvisor | undefined
afterEach(async () => {
  await av?.close()
  av = undefined
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

describe('the bus observer', () => {
  it("publishes a run's done message with the text of its last step that answered with text", async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'av-bus-observer-'))
    const bus = makeInProcessBus()
    const scope = Effect.runSync(Scope.make())
    const done: RunDoneMessage[] = []
    await Effect.runPromise(
      Scope.extend(
        bus.watchDone((message) => done.push(message)),
        scope
      )
    )
    av = await Agentvisor.open({ db: path.join(dir, 'av.db'), bus, telemetry: false })
    const result = await av.run({
      goal: 'answer',
      workspace: path.join(dir, 'ws'),
      providers: [
        {
          name: 'script',
          kind: 'scripted',
          steps: [
            { text: 'first look', toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] },
            { toolCalls: [{ name: 'list_dir', arguments: { path: '.' } }] },
            { text: 'the answer' }
          ]
        }
      ],
      approval: 'auto'
    })
    expect(result).toMatchObject({ status: 'succeeded', steps: 3 })
    await expect
      .poll(() => done.find((m) => m.runId === result.runId))
      .toMatchObject({ runId: result.runId, status: 'succeeded', steps: 3, result: 'the answer' })
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })
})
