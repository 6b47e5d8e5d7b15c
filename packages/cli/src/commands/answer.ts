import { type AnswerError, answerRun } from '@agentvisor/actors'
import { StoreError } from '@agentvisor/store'
import { Cause, Effect, Exit } from 'effect'
import { openCliStore } from '../open-store.js'
import { printJson, say } from '../output.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/** `agentvisor answer RUN [REQUEST] TEXT [--db PATH] [--json]` */
export const answerCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { db: { type: 'string' }, json: { type: 'boolean' } },
    { min: 2, max: 3, names: 'RUN [REQUEST] TEXT (the run, the question when it has several, and the answer)' }
  )
  const runId = positionals[0]!
  const requestId = positionals.length === 3 ? positionals[1] : undefined
  const text = positionals.at(-1)!
  if (text.trim() === '') throw new UsageError('the answer is empty: give the text the model should read')
  const store = await openCliStore(values.db)
  try {
    const exit = await Effect.runPromiseExit(answerRun({ db: store.db, source: 'cli' }, runId, { text, requestId }))
    if (Exit.isFailure(exit)) {
      const error = Cause.squash(exit.cause) as AnswerError
      throw error instanceof StoreError ? error : new UsageError(cliMessage(error))
    }
    const outcome = exit.value
    say(`answered: ${outcome.question.replace(/\s+/g, ' ').slice(0, 100)}  [${outcome.requestId}]`)
    if (outcome.pending > 0) say(`${outcome.pending} more question${outcome.pending === 1 ? '' : 's'} of this run wait for an answer`)
    say(`continue the run with: agentvisor resume ${runId}`)
    if (values.json === true) printJson({ runId, requestId: outcome.requestId, pending: outcome.pending })
    return 0
  } finally {
    await store.close()
  }
}

/** The use case's refusals in this command's words. */
const cliMessage = (error: Exclude<AnswerError, StoreError>): string =>
  error._tag === 'AmbiguousRequestError' ? `run ${error.runId} has ${error.count} questions waiting: name the one this answers after the run id` : error.message
