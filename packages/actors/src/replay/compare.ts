import { quoteName } from '@agentvisor/core'
import type { RunError } from '@agentvisor/core'
import type { PolicyEventRow, StepRow } from '@agentvisor/store'
import { describeCall } from '../driver/stall.js'
import type { ReplayStop } from './recorded-provider.js'
import type { Recording } from './recording.js'

// What a replay compares with its record, step by step, and how the first difference is told
// (docs/replay.md, "What is compared"): the calls the tools were asked for, the policy's
// refusals and decisions, each tool's result, verification's feedback, and the end.

/** Where a replay first went another way than its record. */
export interface Departure {
  readonly step: number
  readonly kind: 'toolCall' | 'policy' | 'toolResult' | 'verify' | 'end'
  /** One line a person reads: the step, what differs, both sides. */
  readonly message: string
}

/** How the end of a run reads in a report. */
const endOf = (status: string, error: RunError | undefined): string => (error === undefined ? status : `${status} (${error.kind}: ${error.message})`)

/** Ends a replay can reproduce: what today's code decides, not a provider's failure or a person's cancel. */
const DECIDED_BY_CODE: ReadonlySet<string> = new Set(['verification', 'stalled', 'internal'])
const codeDecidedEnd = (record: Recording): boolean =>
  record.status === 'succeeded' ||
  record.status === 'step_cap' ||
  (record.status === 'failed' && record.error !== undefined && DECIDED_BY_CODE.has(record.error.kind))

/** A text shown whole when short, else around where it first differs from `other`. */
const excerpt = (text: string, other: string): string => {
  let at = 0
  while (at < text.length && at < other.length && text[at] === other[at]) at++
  const from = Math.max(0, at - 30)
  const shown = text.slice(from, from + 100)
  return JSON.stringify(`${from > 0 ? '...' : ''}${shown}${from + 100 < text.length ? '...' : ''}`)
}

const policyLines = (events: ReadonlyArray<PolicyEventRow>, step: number): string[] =>
  events
    .filter((e) => e.step === step)
    .map((e) =>
      e.kind === 'refusal'
        ? `refused ${e.act} ${JSON.stringify(e.target)} (rule ${quoteName(e.rule)} of layer ${quoteName(e.layer)})`
        : // Who decided (a person, auto, a remembered rule) is not compared: only what was decided.
          `${e.decision} ${e.act} ${JSON.stringify(e.target)}`
    )

/** A refusal names who denied it (`Denied by cli:`); a replay's decisions are the record's, made by nobody. */
const DENIED_BY = /^Denied by [a-z]+:/
const sameResult = (a: string, b: string): boolean => a === b || (DENIED_BY.test(a) && a.replace(DENIED_BY, '') === b.replace(DENIED_BY, ''))

const stepDeparture = (step: number, record: Recording, replay: Recording, r: StepRow, p: StepRow): Departure | undefined => {
  const recordedCalls = r.tool_calls.map(describeCall)
  const replayedCalls = p.tool_calls.map(describeCall)
  for (let i = 0; i < Math.max(recordedCalls.length, replayedCalls.length); i++) {
    if (recordedCalls[i] !== replayedCalls[i])
      return {
        step,
        kind: 'toolCall',
        message: `step ${step}: the tools were asked for ${replayedCalls[i] ?? 'nothing'} where the record asked for ${recordedCalls[i] ?? 'nothing'}`
      }
  }
  const recordedPolicy = policyLines(record.policyEvents, step)
  const replayedPolicy = policyLines(replay.policyEvents, step)
  const added = replayedPolicy.find((line) => !recordedPolicy.includes(line))
  if (added !== undefined) return { step, kind: 'policy', message: `step ${step}: policy ${added} in the replay; the record did not` }
  const dropped = recordedPolicy.find((line) => !replayedPolicy.includes(line))
  if (dropped !== undefined) return { step, kind: 'policy', message: `step ${step}: the record's policy ${dropped}; the replay did not` }
  const recordedResults = r.results ?? []
  const replayedResults = p.results ?? []
  for (let i = 0; i < Math.max(recordedResults.length, replayedResults.length); i++) {
    const a = recordedResults[i]
    const b = replayedResults[i]
    if (a !== undefined && b !== undefined && a.ok === b.ok && sameResult(a.output, b.output)) continue
    const call = recordedCalls[i] ?? replayedCalls[i] ?? `call ${i + 1}`
    const was = a === undefined ? 'no result' : `${a.ok ? '' : 'failed: '}${excerpt(a.output, b?.output ?? '')}`
    const now = b === undefined ? 'no result' : `${b.ok ? '' : 'failed: '}${excerpt(b.output, a?.output ?? '')}`
    return { step, kind: 'toolResult', message: `step ${step}: ${call} answered ${now} where the record has ${was}` }
  }
  if ((r.feedback ?? undefined) !== (p.feedback ?? undefined)) {
    const was = r.feedback == null ? 'nothing (it passed or was not checked)' : excerpt(r.feedback, p.feedback ?? '')
    const now = p.feedback == null ? 'nothing (it passed or was not checked)' : excerpt(p.feedback, r.feedback ?? '')
    return { step, kind: 'verify', message: `step ${step}: verification told the model ${now} where the record has ${was}` }
  }
  return undefined
}

/**
 * The first place the replay departs from its record, or undefined when it went the same way.
 * `stop`: why the replay stopped asking for answers, when it did (its run was then cancelled).
 */
export const firstDeparture = (record: Recording, replay: Recording, stop: ReplayStop | undefined): Departure | undefined => {
  const compared = stop?.reason === 'children' ? stop.step - 1 : record.steps.length
  for (let step = 1; step <= compared; step++) {
    const r = record.steps[step - 1]!
    const p = replay.steps[step - 1]
    if (p === undefined) {
      return {
        step,
        kind: 'end',
        message: `step ${step}: the replay had ended ${endOf(replay.status, replay.error)} after ${step - 1} step${step === 2 ? '' : 's'}; the record went on to this step and ended ${endOf(record.status, record.error)}`
      }
    }
    const departed = stepDeparture(step, record, replay, r, p)
    if (departed !== undefined) return departed
  }
  if (stop?.reason === 'children' || record.followedUp) return undefined
  if (stop?.reason === 'end-of-record') {
    if (!codeDecidedEnd(record)) return undefined
    return {
      step: stop.step,
      kind: 'end',
      message: `step ${stop.step}: the replay went on to ask the model again where the record ended ${endOf(record.status, record.error)} after ${record.steps.length} step${record.steps.length === 1 ? '' : 's'}`
    }
  }
  if (replay.status !== record.status || replay.error?.kind !== record.error?.kind) {
    return {
      step: compared,
      kind: 'end',
      message: `step ${compared}: the replay ended ${endOf(replay.status, replay.error)} where the record ended ${endOf(record.status, record.error)}`
    }
  }
  return undefined
}

/** Why a replay's end was not compared with its record's, when it was not. */
export const uncomparedEnd = (record: Recording, stop: ReplayStop | undefined): string | undefined => {
  if (stop?.reason === 'children') return `step ${stop.step} started children: a child run is replayed on its own (agentvisor replay CHILD)`
  if (record.followedUp) return 'follow-ups continued the run: only its first turn is replayed'
  if (stop?.reason === 'end-of-record' && !codeDecidedEnd(record))
    return `the record ended ${endOf(record.status, record.error)}, which a replay does not reproduce`
  return undefined
}
