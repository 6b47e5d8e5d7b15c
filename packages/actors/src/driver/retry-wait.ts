import type { RunError } from '@agentvisor/core'
import { Duration, Effect } from 'effect'
import type { RunContext } from '../machine/run-machine.js'
import { nowMs } from './now.js'
import type { Drive } from './drive.js'
import type { Work } from './transition-journal.js'

const DUE: Work = { event: { type: 'RETRY_DUE' } }

/**
 * `retrying`'s entry work: waits until the persisted `retryAt`, so a resumed run waits only the
 * rest. A retry whose wait would pass the run's deadline ends the run now, with the error that
 * caused it, instead of sleeping into a timeout.
 */
export const waitToRetry = (drive: Drive, ctx: RunContext): Effect.Effect<Work> =>
  Effect.gen(function* () {
    const retryAt = ctx.retryAt ?? 0
    if (retryAt > drive.deps.deadline) {
      const cause = ctx.error ?? { kind: 'transient' as const, message: 'provider failed' }
      const error: RunError = { ...cause, message: `${cause.message}; not retrying: the wait would pass the run's deadline` }
      return { event: { type: 'FAIL', error } } satisfies Work
    }
    yield* Effect.sleep(Duration.millis(Math.max(0, retryAt - (yield* nowMs))))
    return DUE
  })
