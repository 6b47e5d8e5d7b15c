import type { ActorScope, AnyTransitionDefinition } from 'xstate'
import type { RunContext, RunEvent } from './run-machine.js'
import { runMachine } from './run-machine.js'
import type { RunSnapshot } from './run-state.js'

/**
 * The run machine's transitions without XState's walk of the state tree at every send
 * (docs/architecture.md, "The hot path"). XState computes a transition in general: the exit and
 * entry sets, the transition domain, each state's entry and exit actions, eventless transitions
 * afterwards, and a new snapshot with its state value and tags: about 5 µs a transition, three a
 * step, measured (2026-12-02). For most of the run machine's transitions all of that comes out
 * the same every time: from an atomic state to an atomic state with no entry, exit or eventless
 * transitions of their own, the only thing that differs is the context, which the transition's
 * `assign` computes.
 *
 * So the machine still decides everything: XState selects the transition (`getTransitionData`,
 * the machine's guards on the snapshot and the event), and the first time a transition is taken
 * from a state, XState takes it whole. Its result becomes the template of that (transition,
 * state) pair when the pair qualifies (below) and the context this module computes from the
 * transition's assignments is exactly XState's; from then on the pair's next snapshots are the
 * template with the context its assignments give, as XState's `assign` gives it (a copy of the
 * context with the assignment's fields over it, one copy per assignment). Anything else (no
 * transition or several, a final state, a state with entry or exit actions, an action that is
 * not an assignment) goes through XState every time, as does a snapshot of an inspected actor
 * (run-snapshot.ts, `runScopeOf`). Its tests (test/transition-cache.test.ts) compare it with
 * XState's own actor over long random sequences of every event.
 */
export const cachedRunStep = (snapshot: RunSnapshot, event: RunEvent, scope: ActorScope<RunSnapshot, RunEvent>): RunSnapshot => {
  const value = snapshot.value
  if (typeof value !== 'string' || snapshot.status !== 'active') return runMachine.transition(snapshot, event, scope)
  const selected = runMachine.getTransitionData(snapshot, event)
  // No transition (an ignored event: XState gives the very same snapshot back, which the driver
  // looks for) or several: XState's own way.
  if (selected.length !== 1) return runMachine.transition(snapshot, event, scope)
  const taken = selected[0]!
  let byState = cache.get(taken)
  if (byState === undefined) {
    byState = new Map()
    cache.set(taken, byState)
  }
  const known = byState.get(value)
  if (known === undefined) {
    const after = runMachine.transition(snapshot, event, scope)
    byState.set(value, pathOf(taken, snapshot, after, event, scope) ?? NOT_CACHED)
    return after
  }
  if (known === NOT_CACHED) return runMachine.transition(snapshot, event, scope)
  // The pair's state, tags and XState's methods from the template; the run's own context, children
  // and history (neither of which such a transition changes, `pathOf` checked) from its snapshot.
  const context = assignedContext(known.assignments, snapshot.context, event, scope)
  return { ...known.template, context, children: snapshot.children, historyValue: snapshot.historyValue } as RunSnapshot
}

/** A (transition, state) pair's template and the assignments that make its context. */
interface CachedPath {
  readonly template: RunSnapshot
  readonly assignments: ReadonlyArray<Assignment>
}

/** An `assign` action of the transition, with the parameters it is given. */
interface Assignment {
  readonly assignment: AssignmentFunction | Readonly<Record<string, unknown>>
  readonly params: unknown
}

type AssignmentArgs = {
  readonly context: RunContext
  readonly event: RunEvent
  readonly spawn: () => never
  readonly self: unknown
  readonly system: unknown
}
type AssignmentFunction = (args: AssignmentArgs, params: unknown) => Partial<RunContext>

const NOT_CACHED = 'not cached' as const

/** Per transition of the machine (XState makes them once, with the machine), per state it is taken from. */
const cache = new WeakMap<AnyTransitionDefinition, Map<string, CachedPath | typeof NOT_CACHED>>()

/**
 * The cached path of `taken` from `before`'s state, given XState's `after`, or undefined when
 * the pair does not qualify: anything but assignments to compute, or a context computed here
 * that is not XState's.
 */
const pathOf = (
  taken: AnyTransitionDefinition,
  before: RunSnapshot,
  after: RunSnapshot,
  event: RunEvent,
  scope: ActorScope<RunSnapshot, RunEvent>
): CachedPath | undefined => {
  const target = taken.target?.length === 1 ? taken.target[0] : undefined
  const source = runMachine.root.states[before.value as string]
  if (target === undefined || source === undefined) return undefined
  const simple = (node: typeof target): boolean =>
    node.type === 'atomic' && node.parent === runMachine.root && node.entry.length === 0 && node.exit.length === 0 && (node.always?.length ?? 0) === 0
  if (!simple(target) || !simple(source) || (runMachine.root.always?.length ?? 0) > 0) return undefined
  if (
    after.status !== 'active' ||
    after.value !== target.key ||
    after.children !== before.children ||
    Object.keys(after.historyValue).length > 0 ||
    Object.keys(before.historyValue).length > 0
  )
    return undefined
  const assignments: Assignment[] = []
  for (const action of taken.actions) {
    const assignment = assignmentOf(action)
    if (assignment === undefined) return undefined
    assignments.push(assignment)
  }
  const context = assignedContext(assignments, before.context, event, scope)
  if (!sameFields(context, after.context)) return undefined
  return { template: after, assignments }
}

/** The `assign` behind one of a transition's actions (inline, named, or named with parameters). */
const assignmentOf = (action: unknown): Assignment | undefined => {
  const named = typeof action === 'string' ? action : typeof action === 'object' && action !== null ? (action as { type?: unknown }).type : undefined
  const resolved = typeof action === 'function' ? action : typeof named === 'string' ? runMachine.implementations.actions[named] : undefined
  if (typeof resolved !== 'function' || (resolved as { type?: unknown }).type !== 'xstate.assign') return undefined
  const params = typeof action === 'object' && action !== null && 'params' in action ? (action as { params: unknown }).params : undefined
  // Parameters computed from the context are left to XState.
  if (typeof params === 'function') return undefined
  const assignment = (resolved as unknown as { assignment: Assignment['assignment'] }).assignment
  return typeof assignment === 'function' || (typeof assignment === 'object' && assignment !== null) ? { assignment, params } : undefined
}

/** The context after `assignments`, as XState's `assign` computes it. */
const assignedContext = (
  assignments: ReadonlyArray<Assignment>,
  context: RunContext,
  event: RunEvent,
  scope: ActorScope<RunSnapshot, RunEvent>
): RunContext => {
  let next = context
  for (const { assignment, params } of assignments) {
    const args: AssignmentArgs = { context: next, event, spawn: noSpawn, self: scope.self, system: scope.system }
    let partial: Partial<RunContext>
    if (typeof assignment === 'function') partial = assignment(args, params)
    else {
      const fields: Record<string, unknown> = {}
      for (const key of Object.keys(assignment)) {
        const field = assignment[key]
        fields[key] = typeof field === 'function' ? (field as AssignmentFunction)(args, params) : field
      }
      partial = fields as Partial<RunContext>
    }
    next = Object.assign({}, next, partial)
  }
  return next
}

/** The run machine's assignments start no actors: one that did would be a change to the machine this cache does not cover. */
const noSpawn = (): never => {
  throw new Error('the run machine spawned an actor in an assignment, which its transition cache does not cover')
}

const sameFields = (a: RunContext, b: RunContext): boolean => {
  const keys = Object.keys(a)
  if (keys.length !== Object.keys(b).length) return false
  for (const key of keys) if (!Object.is((a as unknown as Record<string, unknown>)[key], (b as unknown as Record<string, unknown>)[key])) return false
  return true
}
