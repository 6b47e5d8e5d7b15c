import { runMachine } from '@agentvisor/actors'

/** A state of the run machine as the inspector draws it. */
export interface MachineNode {
  /** The dotted state path, as transitions name it: `verifying`, `finished.succeeded`. */
  readonly id: string
  readonly key: string
  /** The dotted path of the enclosing compound state, or null at the top level. */
  readonly parent: string | null
  readonly type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history'
  /** Child state ids, in definition order (compound states only). */
  readonly children: ReadonlyArray<string>
}

/** One way out of a state. `from` is `*` for a transition the root defines: any state not finished. */
export interface MachineEdge {
  readonly from: string
  readonly event: string
  readonly to: string
  /** The guard's name (`hasToolCalls`, `isTransient and hasNextProvider`), when there is one. */
  readonly guard?: string
  /** Leaves and re-enters the same state (its entry work runs again). */
  readonly reenter?: boolean
}

/** The chart of a machine: what `GET /api/machine` answers. */
export interface MachineGraph {
  readonly id: string
  /** The state a run starts in. */
  readonly initial: string
  readonly nodes: ReadonlyArray<MachineNode>
  readonly edges: ReadonlyArray<MachineEdge>
}

/**
 * The part of XState v5's `StateNode` the chart reads. Kept narrow and structural so this file
 * does not depend on xstate's generic types (the cli package does not import xstate itself).
 */
interface StateNodeLike {
  readonly key: string
  readonly id: string
  readonly path: ReadonlyArray<string>
  readonly type: MachineNode['type']
  readonly states: Readonly<Record<string, StateNodeLike>>
  readonly transitions: ReadonlyMap<string, ReadonlyArray<TransitionLike>>
  readonly initial?: { readonly target: ReadonlyArray<{ readonly path: ReadonlyArray<string> }> } | undefined
}

interface TransitionLike {
  readonly eventType: string
  readonly target?: ReadonlyArray<{ readonly path: ReadonlyArray<string> }> | undefined
  readonly guard?: unknown
  readonly reenter?: boolean
}

/** A guard as XState keeps it: a name, `{type}`, or a combinator function carrying `guards`. */
const guardName = (guard: unknown): string | undefined => {
  if (guard === undefined || guard === null) return undefined
  if (typeof guard === 'string') return guard
  if (typeof guard === 'object' && 'type' in guard && typeof guard.type === 'string') return guard.type
  if (typeof guard === 'function' && 'guards' in guard && Array.isArray(guard.guards)) {
    const parts = guard.guards.map(guardName)
    const joiner = guard.name === 'or' ? ' or ' : ' and '
    return guard.name === 'not' ? `not ${parts.join('')}` : parts.join(joiner)
  }
  return 'guarded'
}

/**
 * Walks a machine's state nodes into a graph: every state (compound ones with their children)
 * and every transition with its event, target and guard. The inspector draws its chart from
 * this, so a state or event added to the machine shows up without touching the page.
 */
export const machineGraphOf = (root: StateNodeLike): MachineGraph => {
  const nodes: MachineNode[] = []
  const edges: MachineEdge[] = []
  const pathOf = (node: { readonly path: ReadonlyArray<string> }): string => node.path.join('.')
  const visit = (node: StateNodeLike): void => {
    const isRoot = node.path.length === 0
    if (!isRoot) {
      nodes.push({
        id: pathOf(node),
        key: node.key,
        parent: node.path.length > 1 ? node.path.slice(0, -1).join('.') : null,
        type: node.type,
        children: Object.values(node.states).map(pathOf)
      })
    }
    for (const [event, transitions] of node.transitions) {
      for (const t of transitions) {
        const guard = guardName(t.guard)
        // A targetless transition only runs actions: it moves nowhere, so the chart has no edge.
        for (const target of t.target ?? []) {
          edges.push({
            from: isRoot ? '*' : pathOf(node),
            event,
            to: pathOf(target),
            ...(guard !== undefined ? { guard } : {}),
            ...(t.reenter === true ? { reenter: true } : {})
          })
        }
      }
    }
    for (const child of Object.values(node.states)) visit(child)
  }
  visit(root)
  const initialTarget = root.initial?.target[0]
  return { id: root.id, initial: initialTarget === undefined ? (nodes[0]?.id ?? '') : pathOf(initialTarget), nodes, edges }
}

let runGraph: MachineGraph | undefined

/** The run machine's graph, derived once from `runMachine` itself. */
export const runMachineGraph = (): MachineGraph => {
  runGraph ??= machineGraphOf(runMachine.root)
  return runGraph
}
