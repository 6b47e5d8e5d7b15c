import { openStore, redactPassword, type Store, StoreError } from '@agentvisor/store'
import { Context, Effect, Layer } from 'effect'
import { causeLine, stderrLog } from '../loop/survive.js'

/** The run store as an Effect service: opened (and migrated) when the layer is built, closed with it. */
export class StoreService extends Context.Tag('agentvisor/Store')<StoreService, Store>() {}

/** A layer owning the SQLite store at `file`. */
export const StoreLive = (file: string): Layer.Layer<StoreService, StoreError> =>
  Layer.scoped(
    StoreService,
    Effect.acquireRelease(
      Effect.tryPromise({
        try: () => openStore(file),
        catch: (cause) => new StoreError({ message: `cannot open the store at ${redactPassword(file)}: ${describe(cause)}`, cause })
      }),
      // A close that fails (a last checkpoint refused) is reported; the layer still closes.
      (store) =>
        Effect.tryPromise(() => store.close()).pipe(
          Effect.catchAllCause((cause) => Effect.sync(() => stderrLog(`cannot close the store at ${redactPassword(file)}: ${causeLine(cause)}`)))
        )
    )
  )

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))
