import type { RunStreamEvent } from '../protocol/run-stream-event.js'
import type { PendingRequest } from '../approval/pending-request.js'
import { Data, Effect, Exit, Scope } from 'effect'
import type { Bus } from '../protocol/bus.js'
import {
  type ControlReply,
  PROTOCOL_VERSION,
  type RunDoneMessage,
  type RunEventMessage,
  type RunRequestMessage,
  type RunStartedMessage
} from '../protocol/messages.js'
import { makeNatsBus, type NatsBusOptions } from '../bus/nats-bus.js'
import { runPromise } from '../loop/run-promise.js'

/** A control request the agentvisor side refused (`{ok: false, error}`). */
export class ControlRefusedError extends Data.TaggedError('ControlRefusedError')<{ readonly message: string }> {}

/** A run as `status` reports it: the `runs --json` row. */
export interface RunStatusRecord {
  readonly id: string
  readonly status: string
  readonly goal: string
  readonly parentId: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

const accepted = (reply: ControlReply): Record<string, unknown> => {
  if (!reply.ok) throw new ControlRefusedError({ message: reply.error })
  return reply
}

/**
 * A small client for services that submit and supervise runs over NATS (docs/nats.md) without
 * running agentvisor themselves: submit, status, pending, approve, answer, cancel, tree, and
 * watching starts, requests, streams, events and ends.
 *
 * @example
 * const client = await AgentvisorClient.connect({ servers: 'nats://127.0.0.1:4222' })
 * console.log((await client.status(runId)).status)
 * await client.approve(runId, { decision: 'approve' })
 * await client.close()
 */
export class AgentvisorClient {
  private constructor(
    private readonly bus: Bus,
    private readonly scope: Scope.CloseableScope
  ) {}

  static async connect(options: NatsBusOptions): Promise<AgentvisorClient> {
    const scope = Effect.runSync(Scope.make())
    try {
      return new AgentvisorClient(await runPromise(Scope.extend(makeNatsBus(options), scope)), scope)
    } catch (error) {
      await runPromise(Scope.close(scope, Exit.void))
      throw error
    }
  }

  /**
   * Submits a root run for the workers (`agentvisor.runs.submit`, docs/nats.md): a task file's
   * content, laid over the submit template of the worker that takes it. Resolves with the run id
   * once the run is stored and queued; a task that is invalid or asks for more than the template
   * allows is a `ControlRefusedError` naming the field. Pass a `runId` to submit safely again
   * after a lost reply (the same task under the same id is taken once), and a `traceparent` to
   * make the run's spans part of your trace.
   *
   * @example
   * const runId = await client.submit({ goal: 'Summarise docs/ into SUMMARY.md', workspace: 'docs-team' })
   * console.log(await client.done(runId))
   */
  async submit(
    task: Readonly<Record<string, unknown>>,
    options: { readonly runId?: string; readonly traceparent?: string; readonly timeoutMs?: number } = {}
  ): Promise<string> {
    const { timeoutMs, ...rest } = options
    const reply = accepted(await runPromise(this.bus.submit({ v: PROTOCOL_VERSION, contract: task, ...rest }, timeoutMs)))
    return reply['runId'] as string
  }

  /** The run's `runs --json` row. */
  async status(runId: string): Promise<RunStatusRecord> {
    const { v: _v, ok: _ok, ...row } = accepted(await runPromise(this.bus.control(runId, 'status', { v: PROTOCOL_VERSION })))
    return row as unknown as RunStatusRecord
  }

  /** Asks for the run to be cancelled; its driver, wherever it is, ends it `cancelled`. */
  async cancel(runId: string): Promise<void> {
    accepted(await runPromise(this.bus.control(runId, 'cancel', { v: PROTOCOL_VERSION })))
  }

  /** Decides the run's pending requests (one when `requestId` is given); returns the decided ids. */
  async approve(
    runId: string,
    decision: { readonly decision: 'approve' | 'deny'; readonly requestId?: string; readonly remember?: boolean; readonly edit?: Record<string, unknown> }
  ): Promise<ReadonlyArray<string>> {
    const reply = accepted(await runPromise(this.bus.control(runId, 'approve', { v: PROTOCOL_VERSION, ...decision })))
    return (reply['decided'] as string[] | undefined) ?? []
  }

  /** The run and every run below it, as `runs --json` rows (docs/nats.md, `tree`). */
  async tree(runId: string): Promise<ReadonlyArray<RunStatusRecord>> {
    const reply = accepted(await runPromise(this.bus.control(runId, 'tree', { v: PROTOCOL_VERSION })))
    return (reply['runs'] as RunStatusRecord[] | undefined) ?? []
  }

  /** Calls `onRequest` for every request any run pauses on (`agentvisor.requests`) until the returned stop function is called. */
  async requests(onRequest: (message: RunRequestMessage) => void): Promise<() => Promise<void>> {
    const scope = Effect.runSync(Scope.make())
    await runPromise(Scope.extend(this.bus.watchRequests(onRequest), scope))
    return () => runPromise(Scope.close(scope, Exit.void))
  }

  /** Calls `onStarted` for every run a driver takes anywhere (`agentvisor.runs.*.started`) until the returned stop function is called. */
  async started(onStarted: (message: RunStartedMessage) => void): Promise<() => Promise<void>> {
    const scope = Effect.runSync(Scope.make())
    await runPromise(Scope.extend(this.bus.watchStarted(onStarted), scope))
    return () => runPromise(Scope.close(scope, Exit.void))
  }

  /** The requests the run waits on: approvals, recovery decisions and questions (docs/nats.md). */
  async pending(runId: string): Promise<ReadonlyArray<PendingRequest>> {
    const reply = accepted(await runPromise(this.bus.control(runId, 'pending', { v: PROTOCOL_VERSION })))
    return (reply['requests'] as PendingRequest[] | undefined) ?? []
  }

  /** Answers the run's question (`ask_human`; `requestId` when it has several); returns the question's id. */
  async answer(runId: string, text: string, options: { readonly requestId?: string } = {}): Promise<string> {
    const reply = accepted(await runPromise(this.bus.control(runId, 'answer', { v: PROTOCOL_VERSION, text, ...options })))
    return reply['answered'] as string
  }

  /** Calls `onEvent` for each of the run's events on its stream (docs/streaming.md) until the returned stop function is called. */
  async stream(runId: string, onEvent: (event: RunStreamEvent) => void): Promise<() => Promise<void>> {
    const scope = Effect.runSync(Scope.make())
    await runPromise(Scope.extend(this.bus.watchStream(runId, onEvent), scope))
    return () => runPromise(Scope.close(scope, Exit.void))
  }

  /** Calls `onEvent` for each transition of the run until the returned stop function is called. */
  async watch(runId: string, onEvent: (event: RunEventMessage) => void): Promise<() => Promise<void>> {
    const scope = Effect.runSync(Scope.make())
    await runPromise(Scope.extend(this.bus.watchEvents(runId, onEvent), scope))
    return () => runPromise(Scope.close(scope, Exit.void))
  }

  /** Resolves with the run's `done` message (published when it finishes or pauses). */
  async done(runId: string, timeoutMs = 600_000): Promise<RunDoneMessage> {
    const scope = Effect.runSync(Scope.make())
    try {
      return await new Promise<RunDoneMessage>((resolve, reject) => {
        const timer = setTimeout(() => reject(new ControlRefusedError({ message: `no done message for run ${runId} within ${timeoutMs} ms` })), timeoutMs)
        runPromise(
          Scope.extend(
            this.bus.watchDone((message) => {
              if (message.runId !== runId) return
              clearTimeout(timer)
              resolve(message)
            }),
            scope
          )
        ).catch(reject)
      })
    } finally {
      await runPromise(Scope.close(scope, Exit.void))
    }
  }

  async close(): Promise<void> {
    await runPromise(Scope.close(this.scope, Exit.void))
  }
}
