import { quoteName } from '@agentvisor/core'
import type { RunError } from '@agentvisor/core'
import type { PolicyEventRow, StepRow } from '@agentvisor/store'
import { describeCall } from '../driver/stall.js'
import type { ReplayStop } from './recorded-provider.js'
import type { RecordedTurn, Recording } from './recording.js'

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
const codeDecidedEnd = (turn: RecordedTurn): boolean =>
  turn.status === 'succeeded' || turn.status === 'step_cap' || (turn.status === 'failed' && turn.errorKind !== undefined && DECIDED_BY_CODE.has(turn.errorKind))

/** How a recorded turn's end reads in a report. */
const turnEnd = (turn: RecordedTurn): string => (turn.errorKind === undefined ? turn.status : `${turn.status} (${turn.errorKind})`)

/** One turn of the replay as it went: how it ended, after how many steps of the run, and where the record stopped it. */
export interface ReplayedTurn {
  readonly status: string
  /** The run's steps when the turn ended (all turns so far). */
  readonly steps: number
  /** Why the record stopped answering in this turn, when it did (the turn was then cancelled). */
  readonly stop: ReplayStop | undefined
}

/**
 * Whether the replay sends the follow-up that began the record's next turn after `played`, its
 * replay of `turn`: when it ended where the record's did, on its own the same way, or cancelled
 * where the record's ended from outside the code (a provider's failure, a cancel, a timeout).
 */
export const goesOn = (turn: RecordedTurn, played: ReplayedTurn): boolean => {
  if (played.stop?.reason === 'children') return false
  if (played.stop?.reason === 'end-of-turn') return played.stop.step === turn.lastStep + 1 && !codeDecidedEnd(turn)
  return played.steps === turn.lastStep && played.status === turn.status
}

/** A step's feedback without the follow-up message a person added to it (`agentvisor send`): only verification's is compared. */
const verificationPart = (feedback: string | null | undefined, followUp: string | undefined): string | undefined => {
  if (feedback == null) return undefined
  if (followUp === undefined) return feedback
  if (feedback === followUp) return undefined
  return feedback.endsWith(`\n\n${followUp}`) ? feedback.slice(0, feedback.length - followUp.length - 2) : feedback
}

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

/** `followUp`: the message a person sent after this step, when it ended a turn the record continued. */
const stepDeparture = (step: number, record: Recording, replay: Recording, r: StepRow, p: StepRow, followUp: string | undefined): Departure | undefined => {
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
  const recordedFeedback = verificationPart(r.feedback, followUp)
  const replayedFeedback = verificationPart(p.feedback, followUp)
  if (recordedFeedback !== replayedFeedback) {
    const was = recordedFeedback === undefined ? 'nothing (it passed or was not checked)' : excerpt(recordedFeedback, replayedFeedback ?? '')
    const now = replayedFeedback === undefined ? 'nothing (it passed or was not checked)' : excerpt(replayedFeedback, recordedFeedback ?? '')
    return { step, kind: 'verify', message: `step ${step}: verification told the model ${now} where the record has ${was}` }
  }
  return undefined
}

const plural = (n: number): string => `${n} step${n === 1 ? '' : 's'}`

/**
 * The first place the replay departs from its record, or undefined when it went the same way:
 * turn by turn (`played`: the replay's turns, as far as it went), each step, then how the turn
 * ended.
 */
export const firstDeparture = (record: Recording, replay: Recording, played: ReadonlyArray<ReplayedTurn>): Departure | undefined => {
  const { turns } = record
  for (const [i, turn] of turns.entries()) {
    const went = played[i]
    if (went === undefined) return undefined
    const last = i === turns.length - 1
    const named = turns.length === 1 ? 'the record' : `the record's turn ${i + 1}`
    const compared = went.stop?.reason === 'children' ? went.stop.step - 1 : turn.lastStep
    for (let step = turn.firstStep; step <= compared; step++) {
      const r = record.steps[step - 1]!
      const p = replay.steps[step - 1]
      if (p === undefined) {
        return {
          step,
          kind: 'end',
          message: `step ${step}: the replay had ended ${last ? endOf(replay.status, replay.error) : went.status} after ${plural(step - 1)}; ${named} went on to this step and ended ${last ? endOf(record.status, record.error) : turnEnd(turn)}`
        }
      }
      const departed = stepDeparture(step, record, replay, r, p, step === turn.lastStep ? turns[i + 1]?.message : undefined)
      if (departed !== undefined) return departed
    }
    if (went.stop?.reason === 'children') return undefined
    if (went.stop?.reason === 'end-of-turn') {
      if (!codeDecidedEnd(turn)) continue
      return {
        step: went.stop.step,
        kind: 'end',
        message: `step ${went.stop.step}: the replay went on to ask the model again where ${named} ended ${last ? endOf(record.status, record.error) : turnEnd(turn)} after ${plural(turn.lastStep)}${last ? '' : ' (the next follow-up came there)'}`
      }
    }
    const differs = last ? replay.status !== record.status || replay.error?.kind !== record.error?.kind : went.status !== turn.status
    if (differs) {
      return {
        step: compared,
        kind: 'end',
        message: `step ${compared}: the replay ended ${last ? endOf(replay.status, replay.error) : went.status} where ${named} ended ${last ? endOf(record.status, record.error) : turnEnd(turn)}`
      }
    }
  }
  return undefined
}

/** Why a part of the run (a turn's end, the steps after children) was not compared, when one was not. */
export const uncompared = (record: Recording, played: ReadonlyArray<ReplayedTurn>): string | undefined => {
  const notes: string[] = []
  for (const [i, went] of played.entries()) {
    const turn = record.turns[i]!
    const named = record.turns.length === 1 ? 'the record' : `the record's turn ${i + 1}`
    if (went.stop?.reason === 'children') {
      notes.push(`step ${went.stop.step} started children: a child run is replayed on its own (agentvisor replay CHILD)`)
      break
    }
    if (went.stop?.reason === 'end-of-turn' && !codeDecidedEnd(turn)) {
      const end = i === record.turns.length - 1 ? endOf(record.status, record.error) : turnEnd(turn)
      notes.push(`${named} ended ${end}, which a replay does not reproduce`)
    }
  }
  return notes.length === 0 ? undefined : notes.join('; ')
}
