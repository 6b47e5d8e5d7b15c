import { type Agentvisor, type CancelOutcome, runPromise } from '@agentvisor/actors'
import { type Executor, getRunRow, isFinalStatus, isInterrupted, listApprovals } from '@agentvisor/store'
import { HttpError } from './http.js'

/** What `POST /api/runs/:id/resume` answers. */
export interface ResumeOutcome {
  readonly runId: string
  /** The inspector drives the run now. */
  readonly resumed: true
}

export interface RunActionDeps {
  readonly db: Executor
  /** Drives the run on in this process; rejects when it cannot (another process drives it). */
  readonly drive: (runId: string) => Promise<void>
  /** The inspector's own Agentvisor, opened on first use. */
  readonly agentvisor: () => Promise<Agentvisor>
}

/**
 * Resumes a run from the page, as `agentvisor resume` does, driven by the inspector's process:
 * a run nobody drives (interrupted) or a paused one whose requests are all settled. A run that
 * ended, still waits for a decision or an answer, or is driven elsewhere is a 409 saying which.
 */
export const resumeFromInspector = async (deps: RunActionDeps, runId: string): Promise<ResumeOutcome> => {
  const row = await runPromise(getRunRow(deps.db, runId))
  if (row === undefined) throw new HttpError({ status: 404, message: `no run with id ${runId}` })
  if (isFinalStatus(row.status)) throw new HttpError({ status: 409, message: `run ${runId} has ended (${row.status}): there is nothing to resume` })
  const open = (await runPromise(listApprovals(deps.db, runId))).filter((request) => request.status === 'pending').length
  if (open > 0) {
    throw new HttpError({
      status: 409,
      message: `run ${runId} waits for ${open} decision${open === 1 ? '' : 's'} or answer${open === 1 ? '' : 's'}: give them first`
    })
  }
  if (row.status === 'running' && !isInterrupted(row, Date.now())) {
    throw new HttpError({ status: 409, message: `run ${runId} is being driven by ${row.lease_owner ?? 'another process'}` })
  }
  try {
    await deps.drive(runId)
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    throw new HttpError({ status: 409, message: `run ${runId} cannot be resumed here: ${message}` })
  }
  return { runId, resumed: true }
}

/**
 * Cancels a run from the page through the use case `agentvisor cancel` uses: its driver,
 * wherever it is, ends it `cancelled`; a run nobody drives (paused, interrupted) is ended here.
 * A run that has ended is a 409.
 */
export const cancelFromInspector = async (deps: RunActionDeps, runId: string): Promise<CancelOutcome> => {
  const row = await runPromise(getRunRow(deps.db, runId))
  if (row === undefined) throw new HttpError({ status: 404, message: `no run with id ${runId}` })
  if (isFinalStatus(row.status)) throw new HttpError({ status: 409, message: `run ${runId} has ended (${row.status}): there is nothing to cancel` })
  return (await deps.agentvisor()).cancel(runId, { waitMs: 5_000 })
}

/** What `POST /api/runs/:id/fork` answers. */
export interface ForkView {
  readonly runId: string
  readonly forkedFrom: { readonly runId: string; readonly seq: number }
}

/** The body of `POST /api/runs/:id/fork`: `{seq}`, a whole number from 1. */
export const parseForkBody = (body: unknown): number => {
  const seq = typeof body === 'object' && body !== null ? (body as { seq?: unknown }).seq : undefined
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1)
    throw new HttpError({ status: 400, message: 'the body must be {"seq": N}, N a transition seq from 1' })
  return seq
}

/**
 * Forks a run from the page at `seq` through the use case `agentvisor fork` uses, and drives the
 * fork in the inspector's process. A seq the run cannot be forked at is a 409 saying why.
 */
export const forkFromInspector = async (deps: RunActionDeps, runId: string, seq: number): Promise<ForkView> => {
  try {
    const fork = await (await deps.agentvisor()).fork(runId, { atSeq: seq })
    return { runId: fork.runId, forkedFrom: fork.forkedFrom }
  } catch (error) {
    const tag = (error as { _tag?: unknown })._tag
    if (tag === 'RunNotFoundError') throw new HttpError({ status: 404, message: (error as Error).message })
    if (tag === 'ForkRefusedError') throw new HttpError({ status: 409, message: (error as Error).message })
    throw error
  }
}
