import { Agentvisor } from '@agentvisor/actors'
import type { ChangeFeed } from './change-feed.js'

/**
 * The one Agentvisor an inspector opens, on the first action that drives or cancels a run, and
 * keeps for its life (docs/inspector.md, "How it is built").
 */
export interface OwnAgentvisor {
  /** Opens it the first time; a failed open is tried again by the next call. */
  get(): Promise<Agentvisor>
  /** Drives `runId` on in this process; open pages hear of it when the run settles. */
  drive(runId: string): Promise<void>
  /** Closes it if it was opened: runs it drives are interrupted, resumable as after a crash. */
  close(): Promise<void>
}

export const makeOwnAgentvisor = (db: string, feed: ChangeFeed): OwnAgentvisor => {
  let agentvisor: Promise<Agentvisor> | undefined
  const get = (): Promise<Agentvisor> =>
    (agentvisor ??= Agentvisor.open({ db }).catch((error: unknown) => {
      agentvisor = undefined
      throw error
    }))
  return {
    get,
    drive: async (runId) => {
      const started = await (await get()).resume(runId)
      void started.result.then(
        () => feed.notify([runId]),
        () => {}
      )
    },
    close: async () => {
      if (agentvisor !== undefined) await (await agentvisor.catch(() => undefined))?.close()
    }
  }
}
