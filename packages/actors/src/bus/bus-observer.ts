import { Effect } from 'effect'
import type { RunObserver } from '../supervisor/run-observer.js'
import type { Bus } from './bus.js'
import { PROTOCOL_VERSION } from './messages.js'

/**
 * Publishes a run's transitions on `agentvisor.runs.<id>.events` and its end on `.done` (with
 * the run's last answer as `result`, read by `lastText`: the run writer's `lastStepText`).
 * Publishing is best effort and never slows the run down.
 */
export const busObserver = (bus: Bus, lastText: (runId: string) => string | undefined | Promise<string | undefined>): RunObserver => ({
  onTransition: (t) => {
    const publish = bus.publishEvent({ v: PROTOCOL_VERSION, runId: t.runId, seq: t.seq, from: t.from, event: t.event, to: t.to, at: t.at })
    // The in-process bus has delivered already (as it was called): nothing to run for it.
    if (bus.kind !== 'in-process') Effect.runFork(publish)
  },
  onFinished: (result) => {
    Effect.runFork(
      Effect.tryPromise(async () => lastText(result.runId)).pipe(
        Effect.orElseSucceed(() => undefined),
        Effect.flatMap((text) =>
          bus.publishDone({
            v: PROTOCOL_VERSION,
            runId: result.runId,
            status: result.status,
            steps: result.steps,
            ...(text !== undefined ? { result: text } : {}),
            ...(result.output !== undefined ? { output: result.output } : {}),
            ...(result.error !== undefined ? { error: result.error } : {})
          })
        )
      )
    )
  }
})
