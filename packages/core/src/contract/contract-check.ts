// A hand-written check of the contract's Schemas (task-contract.ts, scripted-step.ts) for the
// shapes tasks and stored contracts take. Effect's decoder costs hundreds of microseconds a
// contract, paid by every run's start and resume (docs/architecture.md, "Start-up"); this check
// costs a few. It takes only values the Schema takes, and gives what the Schema would: anything
// it is not sure of (a wrong value, an unusual object) is left to the Schema, which also names
// what is wrong. packages/core/test/contract-check.test.ts holds the two side by side.
import { MAX_TIMER_MS } from '../provider/scripted-step.js'
import type { TaskContract, TaskFile } from './task-shape.js'
import { MAX_NESTING_DEPTH, isPlainObject } from './nesting.js'

/** `error`: a field the Schema does not name fails (a task); `preserve`: it is kept (a stored contract). */
type Excess = 'error' | 'preserve'
type Check = (value: unknown, excess: Excess, depth: number) => unknown

/** Thrown to leave a value to the Schema; never escapes this module. */
const NOT_SURE: unique symbol = Symbol('not sure')
const notSure = (): never => {
  throw NOT_SURE
}

interface Field {
  readonly name: string
  readonly check: Check
  readonly optional: boolean
}
const req = (name: string, check: Check): Field => ({ name, check, optional: false })
const opt = (name: string, check: Check): Field => ({ name, check, optional: true })

/** A `Schema.Struct`: the named fields in order (an optional one may be absent or undefined), then any others kept. */
const struct = (fields: ReadonlyArray<Field>, refine?: (out: Record<string, unknown>) => boolean): Check => {
  const names = new Set(fields.map((f) => f.name))
  return (value, excess, depth) => {
    if (!isPlainObject(value) || depth > MAX_NESTING_DEPTH) return notSure()
    const out: Record<string, unknown> = {}
    for (const field of fields) {
      if (Object.hasOwn(value, field.name)) {
        const x = value[field.name]
        out[field.name] = field.optional && x === undefined ? undefined : field.check(x, excess, depth + 1)
      } else if (!field.optional) {
        return notSure()
      }
    }
    for (const key in value) {
      if (names.has(key)) continue
      // An inherited field is no field of the value: the Schema's to judge.
      if (excess === 'error' || !Object.hasOwn(value, key)) return notSure()
      out[key] = value[key]
    }
    // A symbol key is a field the Schema counts too.
    if (excess === 'error' && Object.getOwnPropertySymbols(value).length > 0) return notSure()
    if (refine !== undefined && !refine(out)) return notSure()
    return out
  }
}

const is =
  (test: (value: unknown) => boolean): Check =>
  (value) =>
    test(value) ? value : notSure()

const string = is((v) => typeof v === 'string')
const nonEmptyString = is((v) => typeof v === 'string' && v.length >= 1)
const nonBlankString = is((v) => typeof v === 'string' && v.trim() !== '')
const boolean = is((v) => typeof v === 'boolean')
const int = is((v) => Number.isSafeInteger(v))
const positiveInt = is((v) => Number.isSafeInteger(v) && (v as number) > 0)
const nonNegativeInt = is((v) => Number.isSafeInteger(v) && (v as number) >= 0)
const timerPositiveInt = is((v) => Number.isSafeInteger(v) && (v as number) > 0 && (v as number) <= MAX_TIMER_MS)
const delayMs = is((v) => typeof v === 'number' && v >= 0 && v <= MAX_TIMER_MS)
const literal = (...values: ReadonlyArray<string>): Check => is((v) => typeof v === 'string' && values.includes(v))
const httpUrl = is((v) => {
  if (typeof v !== 'string') return false
  try {
    const url = new URL(v)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
})

const array =
  (item: Check, nonEmpty = false): Check =>
  (value, excess, depth) => {
    if (!Array.isArray(value) || (nonEmpty && value.length === 0) || depth > MAX_NESTING_DEPTH) return notSure()
    const out = new Array<unknown>(value.length)
    for (let i = 0; i < value.length; i++) out[i] = item(value[i], excess, depth + 1)
    return out
  }

/** `Schema.Record({ key: String, value: Unknown })`: a new object, its values as given. */
const record: Check = (value) => {
  if (!isPlainObject(value) || Object.getOwnPropertySymbols(value).length > 0) return notSure()
  return { ...value }
}

const ScriptedToolCall = struct([req('name', string), opt('arguments', (v, excess, depth) => (typeof v === 'string' ? v : record(v, excess, depth)))])
const ScriptedError = struct([
  req(
    'status',
    is((v) => Number.isSafeInteger(v) && (v as number) >= 100 && (v as number) <= 599)
  ),
  opt('retryAfterMs', delayMs),
  opt('message', string),
  opt('echoAuthorization', boolean)
])
const ScriptedStep = struct([
  opt('toolCalls', array(ScriptedToolCall)),
  opt('text', string),
  opt('error', ScriptedError),
  opt('disconnect', boolean),
  opt('delayMs', delayMs),
  opt('chunkDelayMs', delayMs),
  opt('usage', struct([req('inputTokens', nonNegativeInt), req('outputTokens', nonNegativeInt)]))
])

const ProviderConfig = struct(
  [
    req('name', nonEmptyString),
    req('kind', literal('openai', 'anthropic', 'scripted')),
    opt('baseUrl', httpUrl),
    opt('model', nonEmptyString),
    opt('apiKeyEnv', nonEmptyString),
    opt('stream', boolean),
    opt('attemptTimeoutMs', timerPositiveInt),
    opt('steps', array(ScriptedStep))
  ],
  (p) => (p.kind === 'scripted' ? p.steps !== undefined : p.model !== undefined)
)

const FileText = struct([req('path', nonEmptyString), req('text', string)])
const VERIFY_KINDS = ['fileContains', 'fileEquals', 'command', 'allOf'] as const
const verifyMembers: Record<(typeof VERIFY_KINDS)[number], Check> = {
  fileContains: struct([req('fileContains', FileText)]),
  fileEquals: struct([req('fileEquals', FileText)]),
  command: struct([req('command', struct([req('run', nonEmptyString), opt('exitCode', int)]))]),
  allOf: struct([
    req(
      'allOf',
      array((v, excess, depth) => VerifySpec(v, excess, depth))
    )
  ])
}
/**
 * The union, by the one member key present: the Schema tries its members in order, and every
 * member before that one lacks its own key, so it is the member the Schema takes too.
 */
const VerifySpec: Check = (value, excess, depth) => {
  if (!isPlainObject(value)) return notSure()
  const present = VERIFY_KINDS.filter((kind) => Object.hasOwn(value, kind))
  if (present.length !== 1) return notSure()
  return verifyMembers[present[0]!](value, excess, depth)
}

const Globs = array(string)
const ActRules = struct([opt('read', Globs), opt('write', Globs), opt('exec', Globs), opt('tool', Globs)])
const PolicyLayer = struct([req('name', nonEmptyString), opt('allow', ActRules), opt('ask', ActRules), opt('deny', ActRules)])
const Policy = struct([req('layers', array(PolicyLayer))])
const Lineage = struct([req('rootId', string), req('parentId', string), req('depth', positiveInt), req('treeDispatchCeiling', positiveInt)])
const approval = literal('prompt', 'defer', 'auto')

const atLeastTwo = is((v) => Number.isSafeInteger(v) && (v as number) >= 2)
const limitFields = (field: (name: string, check: Check) => Field) => [
  field('maxSteps', positiveInt),
  field('maxRetries', nonNegativeInt),
  field('dispatchCeiling', positiveInt),
  field('timeoutMs', timerPositiveInt),
  // A task may leave either out (defaults); a stored contract holds both.
  opt('stall', struct([field('window', atLeastTwo), field('repeats', atLeastTwo)]))
]
const childFields = (field: (name: string, check: Check) => Field) => [
  field('maxChildren', positiveInt),
  field('maxDepth', nonNegativeInt),
  field('maxConcurrent', positiveInt)
]

const hasUniqueNames = (providers: unknown): boolean => {
  const seen = new Set<unknown>()
  for (const p of providers as ReadonlyArray<{ readonly name: unknown }>) {
    if (seen.has(p.name)) return false
    seen.add(p.name)
  }
  return true
}

const TaskFileCheck = struct(
  [
    req('goal', nonBlankString),
    req('workspace', nonBlankString),
    req('providers', array(ProviderConfig, true)),
    opt('verify', VerifySpec),
    opt('limits', struct(limitFields(opt))),
    opt('policy', Policy),
    opt('approval', approval),
    opt('children', struct(childFields(opt))),
    opt(
      'sandbox',
      struct([req('exec', literal('bwrap', 'none')), opt('network', boolean)], (s) => !(s.exec === 'none' && s.network !== undefined))
    ),
    opt('lineage', Lineage)
  ],
  (t) => hasUniqueNames(t.providers)
)

const StoredContractCheck = struct([
  req('goal', string),
  req('workspace', string),
  req('providers', array(ProviderConfig, true)),
  opt('verify', VerifySpec),
  req('limits', struct(limitFields(req))),
  req('policy', Policy),
  req('approval', approval),
  req('children', struct(childFields(req))),
  opt('sandbox', struct([req('exec', literal('bwrap')), req('network', boolean)])),
  opt('lineage', Lineage)
])

const attempt = <A>(check: Check, value: unknown, excess: Excess): A | undefined => {
  try {
    return check(value, excess, 1) as A
  } catch (error) {
    if (error === NOT_SURE) return undefined
    throw error
  }
}

/**
 * A task as `TaskFile` decodes it (no field it does not name), or undefined when the Schema must
 * judge it.
 */
export const checkedTaskFile = (input: unknown): TaskFile | undefined => attempt<TaskFile>(TaskFileCheck, input, 'error')

/**
 * A stored contract's text as the store's contract column decodes it (fields it does not name
 * kept), or undefined when the Schema must judge it: text that does not parse, a value that
 * does not fit.
 */
export const checkedStoredContract = (text: string): TaskContract | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  return attempt<TaskContract>(StoredContractCheck, value, 'preserve')
}
