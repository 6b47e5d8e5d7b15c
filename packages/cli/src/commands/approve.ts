import { type ApproveAnswer, type ApproveOutcome, type ApproveRefusal, approveRun, isApproveRefusal, type RecoveryResolution } from '@agentvisor/actors'
import { MAX_NESTING_DEPTH, valueTooDeepAt } from '@agentvisor/core'
import { Cause, Effect, Exit } from 'effect'
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
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError("--edit must be a JSON object of the tool call's arguments")
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
  const answer: ApproveAnswer =
    resolution === 'completed'
      ? { requestId, decision: 'completed', account: values.completed! }
      : resolution !== undefined
        ? { requestId, decision: resolution }
        : values.deny === true
          ? { requestId, decision: 'deny', remember: values.remember === true }
          : { requestId, decision: 'approve', remember: values.remember === true, edit }
  const store = await openCliStore(values.db)
  let outcome: ApproveOutcome
  try {
    const exit = await Effect.runPromiseExit(approveRun({ db: store.db, source: 'cli' }, runId, answer))
    if (Exit.isFailure(exit)) {
      const error = Cause.squash(exit.cause)
      throw isApproveRefusal(error) ? new UsageError(cliMessage(runId, error)) : error
    }
    outcome = exit.value
  } finally {
    await store.close()
  }
  for (const request of outcome.decided) {
    if (request.kind === 'recovery') say(`${request.status} for interrupted exec ${request.target}  [${request.id}]`)
    else
      say(
        `${request.status} ${request.act} ${request.target}${edit === undefined ? '' : ' (with edits)'}${values.remember === true ? ' (remembered for this workspace)' : ''}  [${request.id}]`
      )
  }
  say(`continue the run with: agentvisor resume ${runId}`)
  if (values.json === true) printJson(outcome.decided.map(({ id, act, target, status }) => ({ id, act, target, status })))
  return 0
}

/** The use case's refusals this command words in its own flags; the rest keep their message. */
const cliMessage = (runId: string, error: ApproveRefusal): string => {
  switch (error._tag) {
    case 'AmbiguousRequestError':
      return error.what === 'edit'
        ? '--edit needs exactly one request: name it after the run id'
        : 'several recovery requests are pending: name one after the run id'
    case 'RecoveryDecisionNeededError':
      return error.requestId !== undefined
        ? `request ${error.requestId} is a recovery request: decide it with --retry, --completed TEXT or --abort`
        : `run ${runId} is waiting for a recovery decision: use --retry, --completed TEXT or --abort`
    default:
      return error.message
  }
}
