import { ApprovalError, decideRecovery, decideRequest, loadRunPolicy, type RecoveryResolution } from '@agentvisor/actors'
import { MAX_NESTING_DEPTH, type TaskContract, valueTooDeepAt } from '@agentvisor/core'
import { getRun, listApprovals } from '@agentvisor/store'
import { Either } from 'effect'
import { openCliStore } from '../open-store.js'
import { printJson, say } from '../output.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

const parseEdit = (text: string): Record<string, unknown> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new UsageError('--edit must be JSON: the tool call\'s arguments, e.g. {"path": "a.txt", "content": "x"}')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError('--edit must be a JSON object of the tool call\'s arguments')
  // Tool arguments nest at most this deep (docs/task-file.md); deeper would overflow when stored.
  if (valueTooDeepAt(value, MAX_NESTING_DEPTH) !== undefined) throw new UsageError(`--edit nests deeper than ${MAX_NESTING_DEPTH} levels`)
  return value as Record<string, unknown>
}

/**
 * `agentvisor approve RUN [REQUEST] [--deny] [--remember] [--edit JSON] [--db PATH] [--json]`;
 * for a recovery request: `--retry`, `--completed TEXT` or `--abort`.
 */
export const approveCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      deny: { type: 'boolean' },
      remember: { type: 'boolean' },
      edit: { type: 'string' },
      retry: { type: 'boolean' },
      completed: { type: 'string' },
      abort: { type: 'boolean' },
      db: { type: 'string' },
      json: { type: 'boolean' }
    },
    { min: 1, max: 2, names: 'RUN (the run whose requests to decide)' }
  )
  const [runId, requestId] = positionals as [string, string | undefined]
  if (values.edit !== undefined && values.deny === true) throw new UsageError('--edit approves with changes; it cannot be combined with --deny')
  const edit = values.edit === undefined ? undefined : parseEdit(values.edit)
  const resolutions = (['retry', 'completed', 'abort'] as const).filter((r) => values[r] !== undefined && values[r] !== false)
  if (resolutions.length > 1) throw new UsageError('choose one of --retry, --completed TEXT and --abort')
  const resolution: RecoveryResolution | undefined = resolutions[0]
  if (resolution !== undefined && (values.deny === true || values.remember === true || edit !== undefined)) {
    throw new UsageError(`--${resolution} settles a recovery request; it does not combine with --deny, --remember or --edit`)
  }
  const store = await openCliStore(values.db)
  try {
    const run = await getRun(store.db, runId)
    if (run === undefined) throw new UsageError(`no run with id ${runId}`)
    const requests = await listApprovals(store.db, runId)
    const pending = requests.filter((r) => r.status === 'pending' && (requestId === undefined || r.id === requestId))
    if (pending.length === 0) {
      const named = requests.find((r) => r.id === requestId)
      if (requestId !== undefined && named !== undefined) throw new UsageError(`request ${requestId} was already ${named.status}`)
      if (requestId !== undefined) throw new UsageError(`run ${runId} has no request ${requestId}`)
      throw new UsageError(`run ${runId} has no pending approval requests`)
    }
    if (edit !== undefined && pending.length > 1) throw new UsageError('--edit needs exactly one request: name it after the run id')
    const recovery = pending.filter((r) => r.kind === 'recovery')
    if (resolution !== undefined) {
      if (recovery.length === 0) throw new UsageError(`run ${runId} has no pending recovery request`)
      if (recovery.length > 1 && requestId === undefined) throw new UsageError('several recovery requests are pending: name one after the run id')
      const request = recovery[0]!
      await decideRecovery({ db: store.db, request, resolution, account: values.completed, source: 'cli', at: new Date().toISOString() })
      say(`${resolution} for interrupted exec ${request.target}  [${request.id}]`)
      say(`continue the run with: agentvisor resume ${runId}`)
      if (values.json === true) printJson([{ id: request.id, act: request.act, target: request.target, status: resolution }])
      return 0
    }
    if (recovery.length > 0 && requestId !== undefined) {
      throw new UsageError(`request ${requestId} is a recovery request: decide it with --retry, --completed TEXT or --abort`)
    }
    if (pending.every((r) => r.kind === 'recovery')) {
      throw new UsageError(`run ${runId} is waiting for a recovery decision: use --retry, --completed TEXT or --abort`)
    }
    const contract = JSON.parse(run.contract_json) as TaskContract
    const policy = await loadRunPolicy(store.db, contract)
    if (Either.isLeft(policy)) throw new UsageError(`run ${runId}: ${policy.left}`)
    const decided: Array<{ id: string; act: string; target: string; status: string }> = []
    for (const request of pending.filter((r) => r.kind !== 'recovery')) {
      await decideRequest({
        db: store.db,
        policy: policy.right,
        workspace: contract.workspace,
        request,
        answer: { decision: values.deny === true ? 'deny' : 'approve', remember: values.remember === true, edit },
        source: 'cli',
        at: new Date().toISOString()
      })
      const status = values.deny === true ? 'denied' : 'approved'
      decided.push({ id: request.id, act: request.act, target: request.target, status })
      say(`${status} ${request.act} ${request.target}${edit === undefined ? '' : ' (with edits)'}${values.remember === true ? ' (remembered for this workspace)' : ''}  [${request.id}]`)
    }
    say(`continue the run with: agentvisor resume ${runId}`)
    if (values.json === true) printJson(decided)
    return 0
  } finally {
    await store.close()
  }
}

export { ApprovalError }
