import { createHash } from 'node:crypto'
import * as path from 'node:path'
import { decodeArgumentsObject, DEFAULT_CHILD_LIMITS, type Limits, parseChildContract, type TaskContract } from '@agentvisor/core'
import type { NewRun } from '@agentvisor/store'
import { Either } from 'effect'

/**
 * A child's run id, derived from its parent, step and call position: a parent that resumes and
 * spawns the same call again names the same child, so nothing is started twice.
 */
export const childRunId = (parentId: string, step: number, position: number): string => {
  const hex = createHash('sha256').update(`${parentId}:${step}:${position}`).digest('hex')
  // Shaped like a UUID (version nibble 8: name-based, not random) so ids look alike everywhere.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((parseInt(hex.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${hex.slice(18, 20)}-${hex.slice(20, 32)}`
}

const narrowLimits = (parent: Limits, asked: unknown): Limits => {
  const wanted = (typeof asked === 'object' && asked !== null ? asked : {}) as Partial<Record<keyof Limits, unknown>>
  const pick = (key: keyof Limits): number => {
    const value = wanted[key]
    return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? Math.min(value, parent[key]) : parent[key]
  }
  return { maxSteps: Math.max(1, pick('maxSteps')), maxRetries: pick('maxRetries'), dispatchCeiling: Math.max(1, pick('dispatchCeiling')), timeoutMs: Math.max(1, pick('timeoutMs')) }
}

/**
 * The contract of a child run from a `spawn_child` call: the parent's providers and policy
 * (a child can never do what its parent may not), limits no larger than the parent's, and a
 * workspace inside the parent's (`children/<n>` by default). Left: why the call is refused.
 */
export const childContract = (
  parent: TaskContract,
  parentId: string,
  rawArguments: string,
  ordinal: number
): Either.Either<TaskContract, string> => {
  // The same decoding as every tool's: a non-object or too deeply nested call is refused here.
  const decoded = decodeArgumentsObject(rawArguments)
  if (Either.isLeft(decoded)) return Either.left(`Invalid arguments for spawn_child: ${decoded.left}`)
  const args = decoded.right
  if (typeof args['goal'] !== 'string' || args['goal'].trim() === '') return Either.left('Invalid arguments for spawn_child: "goal" must be a non-empty string')
  const folder = args['workspace'] === undefined ? `children/${ordinal}` : args['workspace']
  if (typeof folder !== 'string') return Either.left('Invalid arguments for spawn_child: "workspace" must be a string')
  const workspace = path.resolve(parent.workspace, folder)
  if (path.isAbsolute(folder) || (workspace !== parent.workspace && !workspace.startsWith(parent.workspace + path.sep))) {
    return Either.left(`Path escapes the workspace boundary: ${folder}`)
  }
  const lineage = {
    rootId: parent.lineage?.rootId ?? parentId,
    parentId,
    depth: (parent.lineage?.depth ?? 0) + 1,
    treeDispatchCeiling: parent.lineage?.treeDispatchCeiling ?? parent.limits.dispatchCeiling
  }
  const candidate = {
    goal: args['goal'],
    workspace,
    providers: parent.providers,
    ...(args['verify'] !== undefined ? { verify: args['verify'] } : {}),
    limits: narrowLimits(parent.limits, args['limits']),
    policy: parent.policy,
    // Nobody sits at a worker's terminal: a child's asks wait for `approve` instead.
    approval: parent.approval === 'prompt' ? 'defer' : parent.approval,
    children: parent.children ?? DEFAULT_CHILD_LIMITS,
    lineage
  }
  // The internal entry: a child's contract carries the lineage only agentvisor may set.
  return Either.mapLeft(parseChildContract(candidate, parent.workspace), (error) => `Invalid arguments for spawn_child: ${error.message}`)
}

/**
 * The row of a new child run, about to be driven. `parentId` is null when the parent lives in
 * another store (a worker with a store of its own): the link stays in the contract's lineage.
 */
export const childRunRow = (id: string, parentId: string | null, contract: TaskContract, at: string): NewRun => ({
  id,
  parent_id: parentId,
  root_id: contract.lineage?.rootId ?? parentId,
  status: 'running',
  goal: contract.goal,
  contract_json: JSON.stringify(contract),
  state: 'dispatching',
  error_json: null,
  created_at: at,
  updated_at: at,
  ended_at: null
})
