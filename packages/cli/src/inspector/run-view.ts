import {
  type ApprovalTrace,
  inSpawnOrder,
  loadRunSnapshots,
  loadRunTrace,
  pendingRequestOf,
  runPromise,
  type RunTrace,
  type SnapshotAt,
  spawnRanks,
  statePath
} from '@agentvisor/actors'
import {
  type Executor,
  getRunRow,
  isInterrupted,
  listApprovals,
  listRuns,
  listSteps,
  type RunListRow,
  type RunRecord,
  type RunStatus,
  toRunRecord
} from '@agentvisor/store'
import { Either } from 'effect'

/** A `runs --json` row plus what the list shows beside it. */
export interface RunListItem extends RunRecord {
  /** The machine's state path now (`acting`, `finished.succeeded`). */
  readonly state: string
  /** Status `running` but nobody drives it (what `resume --all` picks up). */
  readonly interrupted: boolean
}

/** The machine as a persisted snapshot left it after one transition: what time travel shows. */
export interface SnapshotView {
  readonly seq: number
  readonly state: string
  /** The machine's context after the transition, or null when the snapshot is not readable. */
  readonly context: unknown
}

/** A run and its descendants, for the child-run tree. */
export interface RunTreeNode {
  readonly id: string
  readonly status: RunStatus
  readonly goal: string
  readonly state: string
  readonly createdAt: string
  readonly children: ReadonlyArray<RunTreeNode>
}

/** A request as the page shows it: a pending approval carries its call's arguments, for an edit. */
export type ApprovalView = ApprovalTrace & { readonly arguments?: unknown }

/** What `GET /api/runs/:id` answers: the `show --json` trace plus the state, snapshots and tree. */
export interface RunView extends Omit<RunTrace, 'approvals'> {
  readonly approvals: ReadonlyArray<ApprovalView>
  readonly state: string
  readonly interrupted: boolean
  readonly snapshots: ReadonlyArray<SnapshotView>
  /** The whole tree the run belongs to, from its root run down. */
  readonly tree: RunTreeNode
}

/** Limits that keep one request cheap however deep or wide a run tree has grown. */
const MAX_ANCESTORS = 64
const MAX_TREE_NODES = 500

const listItemOf = (row: RunListRow, now: number): RunListItem => ({
  ...toRunRecord(row),
  state: row.state,
  interrupted: isInterrupted(row, now)
})

/**
 * Runs oldest first, optionally of one status; children of one step in spawn order (they share a
 * timestamp: their parent's calls order them), so the page can list each tree under its root.
 */
export const listRunItems = async (db: Executor, status: RunStatus | undefined): Promise<RunListItem[]> => {
  const now = Date.now()
  const rows = await runPromise(listRuns(db, status === undefined ? {} : { status }))
  // Only parents with children created in the same instant need their steps read.
  const seen = new Set<string>()
  const tied = new Set<string>()
  for (const row of rows) {
    if (row.parent_id === null) continue
    const key = `${row.parent_id} ${row.created_at}`
    if (seen.has(key)) tied.add(row.parent_id)
    seen.add(key)
  }
  const ranks = new Map<string, number>()
  for (const parentId of tied) for (const [id, rank] of spawnRanks(parentId, await runPromise(listSteps(db, parentId)))) ranks.set(id, rank)
  return inSpawnOrder(rows, ranks).map((row) => listItemOf(row, now))
}

/**
 * A snapshot's state and context; one that cannot be had (docs/durability.md, "The journal")
 * still shows the state its transition went to.
 */
const snapshotOf = (at: SnapshotAt, to: string): SnapshotView => {
  if (Either.isLeft(at.snapshot)) return { seq: at.seq, state: to, context: null }
  const { value, context } = at.snapshot.right
  // A stored snapshot is only checked for its envelope: a damaged one may lack either field.
  return { seq: at.seq, state: value === undefined ? to : statePath(value), context: context ?? null }
}

/** Walks up to the root run (bounded, and safe against a parent cycle in a damaged store). */
const rootOf = async (db: Executor, row: RunListRow): Promise<RunListRow> => {
  let current = row
  const seen = new Set([row.id])
  for (let i = 0; i < MAX_ANCESTORS && current.parent_id !== null; i++) {
    const parent = await runPromise(getRunRow(db, current.parent_id))
    if (parent === undefined || seen.has(parent.id)) break
    seen.add(parent.id)
    current = parent
  }
  return current
}

const treeOf = async (db: Executor, root: RunListRow): Promise<RunTreeNode> => {
  let budget = MAX_TREE_NODES
  const build = async (row: RunListRow): Promise<RunTreeNode> => {
    budget -= 1
    // Rows without their contracts: the tree shows none, and a corrupt one is no reason not to show it.
    const listed = budget > 0 ? await runPromise(listRuns(db, { parentId: row.id })) : []
    const children = listed.length > 1 ? inSpawnOrder(listed, spawnRanks(row.id, await runPromise(listSteps(db, row.id)))) : listed
    const built: RunTreeNode[] = []
    for (const child of children) {
      if (budget <= 0) break
      built.push(await build(child))
    }
    return { id: row.id, status: row.status, goal: row.goal, state: row.state, createdAt: row.created_at, children: built }
  }
  return build(root)
}

/** The run view of `runId`, or undefined when there is no such run. */
export const loadRunView = async (db: Executor, runId: string): Promise<RunView | undefined> => {
  const [row, trace, snapshots, requests] = await Promise.all([
    runPromise(getRunRow(db, runId)),
    runPromise(loadRunTrace(db, runId)),
    runPromise(loadRunSnapshots(db, runId)),
    runPromise(listApprovals(db, runId))
  ])
  if (row === undefined || trace === undefined || snapshots === undefined) return undefined
  const pending = new Map(requests.filter((request) => request.status === 'pending').map((request) => [request.id, pendingRequestOf(request)]))
  return {
    ...trace,
    approvals: trace.approvals.map((approval) => {
      const args = pending.get(approval.id)?.arguments
      return args === undefined ? approval : { ...approval, arguments: args }
    }),
    state: row.state,
    interrupted: isInterrupted(row, Date.now()),
    snapshots: snapshots.map((at, i) => snapshotOf(at, trace.transitions[i]?.to ?? '')),
    tree: await treeOf(db, await rootOf(db, row))
  }
}
