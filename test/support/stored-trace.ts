import { runTrace } from '@agentvisor/actors'
import { openStore } from '@agentvisor/store'
import { Effect } from 'effect'

/**
 * A run's trace as `agentvisor show RUN --json` prints it (the same use case, serialised the same
 * way), read in this process from the store at `db`, opened read-only as show opens it. For a
 * test that looks at what a run stored, where the show command is not its subject: one process
 * fewer per look (a CLI start costs ~1 s of CPU). A run that is not there fails the test.
 */
export const storedTrace = async <T>(db: string, runId: string): Promise<T> => {
  const store = await openStore(db, { readOnly: true })
  try {
    return JSON.parse(JSON.stringify(await Effect.runPromise(runTrace(store.db, runId)))) as T
  } finally {
    await store.close()
  }
}
