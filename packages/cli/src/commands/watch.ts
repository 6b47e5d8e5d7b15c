import { followEvents, type RunStreamEvent, runPromise } from '@agentvisor/actors'
import { getRunRow } from '@agentvisor/store'
import { openCliReader } from '../open-store.js'
import { describeUsage, printJsonText, say } from '../output.js'
import { terminalSafe } from '../terminal-text.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/** `agentvisor watch RUN [--json] [--from SEQ] [--db PATH]` */
export const watchCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { json: { type: 'boolean' }, from: { type: 'string' }, db: { type: 'string' } },
    { min: 1, max: 1, names: 'RUN (the id of the run to watch)' }
  )
  const runId = positionals[0]!
  const fromSeq = values.from === undefined ? 1 : Number(values.from)
  if (!Number.isInteger(fromSeq) || fromSeq < 1) throw new UsageError(`--from must be a transition seq, a whole number from 1 (got "${values.from}")`)
  const store = await openCliReader(values.db)
  const stop = new AbortController()
  // Ctrl-C stops the watching, not the run (which another process drives).
  const onSignal = (): void => stop.abort()
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    if ((await runPromise(getRunRow(store.db, runId))) === undefined) throw new UsageError(`no run with id ${runId}`)
    let status: string | undefined
    for await (const event of followEvents(store.db, runId, { fromSeq, signal: stop.signal })) {
      if (values.json === true) printJsonText(JSON.stringify(event))
      else printHuman(event)
      if (event.kind === 'done') status = event.status
    }
    return status === undefined ? 0 : status === 'succeeded' ? 0 : 1
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    await store.close()
  }
}

/** One line per event as a person reads it (each answer's text whole, read from the store: docs/streaming.md). */
const printHuman = (event: RunStreamEvent): void => {
  const line = humanLine(event)
  if (line !== undefined) process.stdout.write(`${terminalSafe(line)}\n`)
}

const humanLine = (event: RunStreamEvent): string | undefined => {
  switch (event.kind) {
    case 'transition':
      return `${String(event.seq).padStart(4)}  ${event.from} --${event.event}--> ${event.to}`
    case 'text':
      return `      says: ${event.delta}`
    case 'attempt':
      return `      attempt ${event.step}.${event.attempt} ${event.provider} (${event.reason}): ${event.outcome}${event.errorKind !== undefined ? ` ${event.errorKind}` : ''}${event.httpStatus !== undefined ? ` ${event.httpStatus}` : ''}`
    case 'toolCall':
      return `      calls ${event.name} ${JSON.stringify(event.arguments).slice(0, 160)}`
    case 'toolResult':
      return `      ${event.name} -> ${event.output.replace(/\s+/g, ' ').slice(0, 160)}`
    case 'approvalRequested':
      return `      waits for approval: ${event.request.act ?? ''} ${event.request.target ?? ''} [${event.request.id}]`
    case 'inputRequested':
      return `      the model asks: ${event.request.question ?? ''} [${event.request.id}]`
    case 'child':
      return `      child ${event.childId} ${event.status}: ${event.goal.slice(0, 80)}`
    case 'stall':
      return event.phase === 'warned' ? `      stall warning (step ${event.step}): ${event.message}` : `      ${event.message}`
    case 'usage':
      return `      used so far: ${describeUsage(event.usage)}`
    case 'done':
      say(`agentvisor: run ${event.runId} ${event.status} after ${event.steps} step${event.steps === 1 ? '' : 's'}; ${describeUsage(event.usage)}`)
      return undefined
  }
}
