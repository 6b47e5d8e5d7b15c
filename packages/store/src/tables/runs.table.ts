import type { RunError, TaskContract } from '@agentvisor/core'
import type { Generated, Insertable, Selectable, Updateable } from 'kysely'

/** The status of a run, as `runs --json` and `show --json` report it (docs/cli.md, "Statuses and error kinds"). */
export const RunStatus = {
  running: 'running',
  awaitingApproval: 'awaiting_approval',
  awaitingInput: 'awaiting_input',
  succeeded: 'succeeded',
  stepCap: 'step_cap',
  failed: 'failed',
  cancelled: 'cancelled',
  timedOut: 'timed_out'
} as const
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus]

const FINAL_STATUSES: ReadonlySet<string> = new Set<RunStatus>(['succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'])

/** Whether a run with this status has ended for good (paused and running runs have not). */
export const isFinalStatus = (status: string): boolean => FINAL_STATUSES.has(status)

/** One row per run, child runs included (`parent_id`). */
export interface RunsTable {
  id: string
  parent_id: string | null
  status: RunStatus
  goal: string
  /** The machine's state path, dotted (`finished.succeeded`). */
  state: string
  steps: Generated<number>
  /** The run's `RunError` as JSON; read back as `RunRow.error` (runs.columns.ts). */
  error_json: string | null
  /** ISO-8601. */
  created_at: string
  /** ISO-8601. */
  updated_at: string
  /** ISO-8601; null while the run can still move. */
  ended_at: string | null
  /** Who drives the run now (`host/pid/nonce`); null when nobody does. */
  lease_owner: Generated<string | null>
  /** Epoch ms after which the lease may be taken over. */
  lease_expires_at: Generated<number | null>
  /** The fencing token: bumped at every acquisition; every write of a driver checks it. */
  lease_token: Generated<number>
  /** Set by `agentvisor cancel` from any process; the driver polls for it. */
  cancel_requested_at: Generated<string | null>
  /** The root run of the tree this run belongs to (null: a root, or a row from before trees). */
  root_id: Generated<string | null>
  /**
   * The run's own `Usage` as JSON, written when its driver lets it go (ended or paused); null
   * while it runs. What `runs --json` and the NATS status reply show (records/run-record.ts).
   */
  usage_json: Generated<string | null>
  /** The run this one was forked from (`agentvisor fork`), and the seq it was forked at; null otherwise. */
  forked_from_run: Generated<string | null>
  forked_from_seq: Generated<number | null>
}

/** Each run's task contract, written once with the run; apart so the hot `runs` row stays small. */
export interface RunContractsTable {
  run_id: string
  /**
   * The validated task contract as JSON; read back as `RunWithContract.contract` (runs.columns.ts).
   * It names API-key environment variables; it never holds a key.
   */
  contract_json: string
}

/** A `runs` row as the database holds it, JSON still text; no read of the store returns it. */
export type StoredRunRow = Selectable<RunsTable>
/** Where a fork came from: read where a run is shown whole (`getRunRow`), not by lists. */
type ForkColumns = 'forked_from_run' | 'forked_from_seq'
type ForkFields = { readonly forked_from_run?: string | null; readonly forked_from_seq?: number | null }
/** A `runs` row as `listRuns` reads it: every column but the JSON one (and the fork's). */
export type RunListRow = Omit<StoredRunRow, 'error_json' | ForkColumns> & ForkFields
/** A `runs` row as read: its error decoded (runs.columns.ts). */
export type RunRow = Omit<StoredRunRow, 'error_json' | ForkColumns> & ForkFields & { readonly error: RunError | null }
/** A run with its contract, as `getRun` and `listChildren` read it. */
export type RunWithContract = RunRow & { readonly contract: TaskContract }
/** A run to insert (`steps` defaults to 0), with its contract. */
export type NewRun = Insertable<RunsTable> & { readonly contract_json: string }
/** Any subset of a run's columns, as Kysely types an update. */
export type RunUpdate = Updateable<RunsTable>
