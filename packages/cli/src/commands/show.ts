import { quoteName } from '@agentvisor/core'
import { type RunTrace, runTrace } from '@agentvisor/actors'
import { Effect, Either } from 'effect'
import { openCliReader } from '../open-store.js'
import { describeUsage, printJson } from '../output.js'
import { terminalSafe } from '../terminal-text.js'
import { parseCommandArgs } from '../usage-error.js'

/** `agentvisor show RUN [--json] [--db PATH]` */
export const showCommand = async (argv: string[]): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { json: { type: 'boolean' }, db: { type: 'string' } },
    { min: 1, max: 1, names: 'RUN (the id of the run to show)' }
  )
  const runId = positionals[0]!
  const store = await openCliReader(values.db)
  try {
    // The use case `Agentvisor.trace` shares. Its RunNotFoundError or StoreError itself, not
    // Effect's wrapper of it: main prints it as one line (exit 2).
    const loaded = await Effect.runPromise(Effect.either(runTrace(store.db, runId)))
    if (Either.isLeft(loaded)) throw loaded.left
    const trace = loaded.right
    if (values.json === true) printJson(trace)
    else process.stdout.write(formatTrace(trace))
    return 0
  } finally {
    await store.close()
  }
}

/**
 * The trace as a person reads it: the run, its transitions, and each step with its attempts.
 * Each line is terminal-safe: goals, answers, results and errors are shown, never acted on.
 */
export const formatTrace = (trace: RunTrace): string => {
  const lines: string[] = []
  const { run } = trace
  lines.push(`run ${run.id}  ${run.status}`)
  lines.push(`  goal: ${run.goal}`)
  if (run.parentId !== null) lines.push(`  parent: ${run.parentId}`)
  if (run.forkedFrom !== undefined) lines.push(`  forked from: ${run.forkedFrom.runId} at seq ${run.forkedFrom.seq}`)
  lines.push(`  created ${run.createdAt}, updated ${run.updatedAt}`)
  if (run.error !== undefined) lines.push(`  error: ${run.error.kind}: ${run.error.message}`)
  lines.push(`  usage: ${describeUsage(run.usage)}${run.treeUsage !== undefined ? `; with its children: ${describeUsage(run.treeUsage)}` : ''}`)
  if (trace.output !== undefined)
    lines.push(`  output: ${(typeof trace.output === 'string' ? trace.output : JSON.stringify(trace.output)).replace(/\s+/g, ' ').slice(0, 400)}`)
  if (trace.turns.length > 1) {
    for (const turn of trace.turns.slice(1)) {
      lines.push(`  turn ${turn.turn} from step ${turn.firstStep} (seq ${turn.seq}, ${turn.at}): ${(turn.message ?? '').replace(/\s+/g, ' ').slice(0, 200)}`)
    }
  }
  lines.push('', 'transitions:')
  for (const t of trace.transitions) lines.push(`  ${String(t.seq).padStart(3)}  ${t.at}  ${t.from} --${t.event}--> ${t.to}`)
  // A step whose model call never succeeded has a receipt but no step row: show both kinds.
  const numbers = [...new Set([...trace.steps.map((s) => s.step), ...trace.receipts.map((r) => r.step)])].sort((a, b) => a - b)
  for (const number of numbers) {
    const step = trace.steps.find((s) => s.step === number)
    lines.push('', step === undefined ? `step ${number} (no answer)` : `step ${number} (${step.provider}, ${step.tokens} tokens)`)
    const receipt = trace.receipts.find((r) => r.step === number)
    for (const [i, a] of (receipt?.attempts ?? []).entries()) {
      const failure = a.errorKind === undefined ? '' : ` ${a.errorKind}${a.httpStatus === undefined ? '' : ` ${a.httpStatus}`}`
      lines.push(`  attempt ${i + 1}: ${a.provider} ${a.reason} -> ${a.outcome}${failure}${a.latencyMs === undefined ? '' : ` in ${a.latencyMs}ms`}`)
    }
    if (step === undefined) continue
    if (step.text !== '') lines.push(`  says: ${step.text.replace(/\s+/g, ' ').slice(0, 200)}`)
    for (const [i, call] of step.toolCalls.entries()) {
      // A tool that is not a built-in says where it comes from and what it may do (docs/tools.md).
      const origin = call.source === undefined || call.source === 'builtin' ? '' : ` [${call.source}, ${call.effect}]`
      lines.push(`  ${call.name}${origin} ${JSON.stringify(call.arguments).slice(0, 160)}`)
      const result = step.results[i]
      if (result !== undefined) lines.push(`    -> ${result.replace(/\s+/g, ' ').slice(0, 160)}`)
    }
  }
  if (trace.approvals.length > 0) {
    lines.push('', 'requests:')
    for (const a of trace.approvals) {
      // A question's target is the question; an approval's, what the call acts on.
      const what = a.kind === 'input' ? `question: ${oneLine(a.target)}` : `${a.kind === 'recovery' ? 'recovery of ' : ''}${a.act} ${oneLine(a.target)}`
      const by = a.source === undefined ? '' : ` by ${a.source}`
      const rule = a.kind === 'input' || a.kind === 'recovery' ? '' : ` (rule ${quoteName(a.rule)} in layer ${quoteName(a.layer)})`
      lines.push(`  ${a.id}  step ${a.step}  ${a.status}${by}  ${what}${rule}`)
    }
    const pending = trace.approvals.filter((a) => a.status === 'pending')
    if (pending.length > 0) {
      const questions = pending.some((a) => a.kind === 'input')
      lines.push(
        `  (${questions ? `agentvisor answer ${run.id} REQUEST TEXT` : `agentvisor approve ${run.id} REQUEST [--deny]`}, then agentvisor resume ${run.id})`
      )
    }
  }
  if (trace.policyEvents.length > 0) {
    lines.push('', 'policy:')
    for (const e of trace.policyEvents) {
      const performed = e.performedTarget === undefined ? '' : ` (performed: ${oneLine(e.performedTarget)})`
      lines.push(
        `  step ${e.step}  ${e.decision} ${e.act} ${oneLine(e.target)}${performed}  rule ${quoteName(e.rule)} in layer ${quoteName(e.layer)}, ${e.source}`
      )
    }
  }
  if (trace.forks !== undefined) {
    lines.push('', 'forks:')
    for (const fork of trace.forks) lines.push(`  ${fork.runId}  from seq ${fork.seq}`)
  }
  if (trace.children.length > 0) {
    lines.push('', 'children:')
    for (const child of trace.children) lines.push(`  ${child.id}  ${child.status}`)
  }
  return `${lines.map((line) => terminalSafe(line)).join('\n')}\n`
}

const oneLine = (text: string, max = 160): string => {
  const line = text.replace(/\s+/g, ' ')
  return line.length > max ? `${line.slice(0, max)}...` : line
}
