import { makeMcpPool } from '@agentvisor/core'
import { DEFAULT_STORE_OUTAGE_MS, makeRunWriter, type OutageRidingWriter, outageRidingWriter, type RunWriter, type Store } from '@agentvisor/store'
import { Context, Effect, Layer } from 'effect'
import { busObserver } from '../bus/bus-observer.js'
import { makeSpawn } from '../supervisor/spawn.js'
import { causeLine } from '../loop/survive.js'
import { telemetryObserver } from '../telemetry/telemetry-observer.js'
import { makeLaunchRun } from '../supervisor/launch-run.js'
import { DEFAULT_LEASE_POLICY, makeLeaseOwner } from '../supervisor/lease.js'
import { makeLeaseKeeper, storeLeaseQueries } from '../supervisor/lease-keeper.js'
import { makeRunFibers } from '../supervisor/run-fibers.js'
import type { LaunchRun, SpawnChild, StartOptions } from '../supervisor/run-handle.js'
import type { SupervisorOptions } from '../supervisor/supervisor-options.js'
import type { RunObserver } from '../driver/run-observer.js'
import { makeControlHandler } from '../worker/control-handler.js'
import { serveBus } from './serve-bus.js'
import { StoreService } from '../supervisor/store-service.js'

/** What the Supervisor service hands out: runs launched (launch-run.ts) and children spawned from code (spawn.ts). */
export interface SupervisorApi extends LaunchRun {
  readonly spawn: SpawnChild
}

/** Starts and resumes runs, one supervised fiber each, all interrupted when the layer closes. */
export class Supervisor extends Context.Tag('agentvisor/Supervisor')<Supervisor, SupervisorApi>() {}

/**
 * The supervisor layer; it needs the store. Its concepts live apart: launching a run (start,
 * resume: launch-run.ts), driving it under its deadline, cancel and lease (supervise.ts),
 * children from code (supervisor/spawn.ts) and what it serves from the bus (serve-bus.ts).
 */
export const SupervisorLive = (options: SupervisorOptions = {}): Layer.Layer<Supervisor, never, StoreService> =>
  Layer.scoped(
    Supervisor,
    Effect.gen(function* () {
      const storeService = yield* StoreService
      const { db } = storeService
      // Failures a loop survives are logged with their cause: to the worker's log, else stderr.
      const warn = options.log ?? ((line: string) => void process.stderr.write(`agentvisor: ${line}\n`))
      const { writer, riding } = outageWriter(storeService, options.storeOutageMs, warn)
      // Runs before the store closes (layers close in reverse): the checkpointer ends first. A
      // last write that fails is reported, not a defect of the closing layer.
      yield* Effect.addFinalizer(() =>
        writer.close().pipe(Effect.catchAllCause((cause) => Effect.sync(() => warn(`cannot close the run writer: ${causeLine(cause)}`))))
      )

      // A run's observers: telemetry and the supervisor's, then the run's own, then the bus's.
      // Every run that brings none of its own shares one list.
      const leading: ReadonlyArray<RunObserver> = [
        ...(options.telemetry === false ? [] : [telemetryObserver(options.telemetry ?? {})]),
        ...(options.observers ?? [])
      ]
      const trailing: ReadonlyArray<RunObserver> = options.bus !== undefined ? [busObserver(options.bus, writer.lastStepText, db)] : []
      const shared: ReadonlyArray<RunObserver> = [...leading, ...trailing]
      const observersOf = (startOptions: StartOptions): ReadonlyArray<RunObserver> =>
        startOptions.observers === undefined || startOptions.observers.length === 0 ? shared : [...leading, ...startOptions.observers, ...trailing]
      const leasePolicy = options.lease ?? DEFAULT_LEASE_POLICY
      const leaseOwner = makeLeaseOwner()
      const leases = yield* makeLeaseKeeper(storeLeaseQueries(db), leaseOwner, leasePolicy, warn)
      const runFibers = makeRunFibers()
      // The MCP servers runs start: all ended when the layer closes, after the runs (finalizers run in reverse).
      const mcp = makeMcpPool()
      yield* Effect.addFinalizer(() => Effect.promise(() => mcp.close()))
      const ownControl = makeControlHandler({ db, drive: () => undefined, log: warn })
      const { start, resume } = makeLaunchRun({ db, writer, options, warn, observersOf, leasePolicy, leaseOwner, leases, runFibers, mcp, ownControl })

      yield* serveBus({ db, bus: options.bus, options, resume, warn })
      const spawn = yield* makeSpawn({ db, bus: options.bus, warn })

      // Registered last, so it runs first as the layer closes: runs stop before the bus
      // consumers, the lease keeper and the store they use. A commit waiting out a store outage
      // is uninterruptible: it stops waiting first, so closing never waits for the store.
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          Effect.sync(() => riding?.stopWaiting()),
          runFibers.interruptAll
        )
      )
      return { start, resume, spawn }
    })
  )

/**
 * The writer runs use: one that rides out store outages for `limitMs` where the store can have
 * them (PostgreSQL; never SQLite, whose hot path stays synchronous), else the writer itself.
 */
const outageWriter = (
  store: Pick<Store, 'db' | 'sqlite' | 'pool'>,
  limitMs: number | undefined,
  log: (line: string) => void
): { readonly writer: RunWriter; readonly riding: OutageRidingWriter | undefined } => {
  const limit = limitMs ?? DEFAULT_STORE_OUTAGE_MS
  if (store.sqlite !== undefined || limit <= 0) return { writer: makeRunWriter(store), riding: undefined }
  const riding = outageRidingWriter(store, { limitMs: limit, log })
  return { writer: riding, riding }
}
