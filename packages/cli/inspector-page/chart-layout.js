// @ts-check
/**
 * The state chart's layout, with no DOM: where `GET /api/machine`'s states and compound boxes go,
 * and which way each edge runs. States are ranked left to right by the longest path from the
 * initial state, ignoring back edges; the first way out of each state (the happy path) runs
 * straight through the middle row; compound states are boxes around their children; edges that
 * skip a column run in lanes above or below the chart (chart-geometry.js draws them).
 */

/** @import { MachineEdge, MachineGraph, MachineNode } from '../src/inspector/machine-graph.js' */

/** @typedef {{ readonly x: number, readonly y: number, readonly col: number }} NodePos */
/**
 * @typedef {object} Lane
 * @property {boolean} up
 * @property {number} depth
 * @property {number} y
 * @property {boolean} fromCap
 * @property {boolean} toCap
 */
/**
 * One drawn edge per (from, to) pair of leaf states: its events and guards are listed on it.
 * @typedef {object} ChartEdge
 * @property {string} from
 * @property {string} to
 * @property {string[]} events
 * @property {string[]} detail
 * @property {'forward' | 'back' | 'self'} kind
 * @property {Lane | undefined} lane
 * @property {boolean} paired
 */
/** @typedef {{ readonly id: string, readonly key: string, readonly x: number, readonly y: number, readonly w: number, readonly h: number, readonly col: number }} GroupBox */
/**
 * @typedef {object} MachineLayout
 * @property {string[]} leaves
 * @property {ReadonlyMap<string, MachineNode>} byId
 * @property {ReadonlyMap<string, NodePos>} pos
 * @property {ChartEdge[]} edges
 * @property {GroupBox[]} groups
 * @property {MachineEdge[]} anyState Transitions the root defines: from any state not finished.
 * @property {string} initial
 * @property {number} minY
 * @property {number} width
 * @property {number} height
 * @property {number} offsetX
 */

/** The chart's sizes, in SVG units. */
export const CHART = Object.freeze({ nodeW: 150, nodeH: 34, gap: 160, rowH: 74, pad: 26, lane: 16, groupPad: 12, groupHead: 20, lineH: 11 })

/**
 * @template K, V
 * @param {ReadonlyMap<K, V>} map
 * @param {K} key
 * @returns {V}
 */
const get = (map, key) => {
  const value = map.get(key)
  if (value === undefined) throw new Error(`the chart has no state ${String(key)}`)
  return value
}

/**
 * @param {ReadonlyArray<number>} values
 * @returns {[number, number]}
 */
const span = (values) => [Math.min(...values), Math.max(...values)]

/**
 * Depth-first from the initial state: edges back to a state on the current path are back edges,
 * edges to itself self edges. Returns the states in the order first reached.
 * @param {ReadonlyArray<string>} leaves
 * @param {string} initial
 * @param {ReadonlyMap<string, ChartEdge[]>} out
 * @returns {Map<string, number>}
 */
const classifyEdges = (leaves, initial, out) => {
  /** @type {Map<string, 1 | 2>} */
  const mark = new Map()
  /** @type {Map<string, number>} */
  const order = new Map()
  /** @param {string} id */
  const visit = (id) => {
    mark.set(id, 1)
    order.set(id, order.size)
    for (const e of out.get(id) ?? []) {
      if (e.to === id) e.kind = 'self'
      else if (mark.get(e.to) === 1) e.kind = 'back'
      else {
        e.kind = 'forward'
        if (!mark.has(e.to)) visit(e.to)
      }
    }
    mark.set(id, 2)
  }
  if (out.has(initial)) visit(initial)
  for (const id of leaves) if (!mark.has(id)) visit(id)
  return order
}

/**
 * Longest-path ranks over forward edges; the children of a compound state share one column.
 * @param {ReadonlyArray<string>} leaves
 * @param {ReadonlyArray<ChartEdge>} edges
 * @param {ReadonlyArray<MachineNode>} groups
 * @returns {Map<string, number>}
 */
const rankLeaves = (leaves, edges, groups) => {
  const rank = new Map(leaves.map((id) => [id, 0]))
  const of = (/** @type {string} */ id) => rank.get(id) ?? 0
  for (let round = 0; round < leaves.length + 2; round++) {
    let moved = false
    for (const e of edges) {
      if (e.kind === 'forward' && of(e.to) < of(e.from) + 1) {
        rank.set(e.to, of(e.from) + 1)
        moved = true
      }
    }
    for (const g of groups) {
      const r = Math.max(...g.children.map(of))
      for (const c of g.children) {
        if (of(c) !== r) {
          rank.set(c, r)
          moved = true
        }
      }
    }
    if (!moved) break
  }
  return rank
}

/**
 * One drawn edge per (from, to) pair of leaf states (an edge to or from a compound state is drawn
 * to or from its first leaf), and apart the transitions the root defines.
 * @param {MachineGraph} graph
 * @param {(id: string) => string} leafOf
 */
const drawnEdges = (graph, leafOf) => {
  /** @type {ChartEdge[]} */
  const edges = []
  /** @type {Map<string, ChartEdge>} */
  const byPair = new Map()
  /** @type {MachineEdge[]} */
  const anyState = []
  for (const e of graph.edges) {
    if (e.from === '*') {
      anyState.push(e)
      continue
    }
    const from = leafOf(e.from)
    const to = leafOf(e.to)
    const key = `${from}>${to}`
    let drawn = byPair.get(key)
    if (drawn === undefined) {
      drawn = { from, to, events: [], detail: [], kind: 'back', lane: undefined, paired: false }
      byPair.set(key, drawn)
      edges.push(drawn)
    }
    if (!drawn.events.includes(e.event)) drawn.events.push(e.event)
    drawn.detail.push(e.event + (e.guard ? ` [${e.guard}]` : '') + (e.reenter ? ' (re-enters)' : ''))
  }
  return { edges, anyState }
}

/**
 * The happy path: the first forward way out of each state, from the initial one.
 * @param {string} initial
 * @param {ReadonlyMap<string, ReadonlyArray<ChartEdge>>} out
 * @returns {Set<string>}
 */
const happyPath = (initial, out) => {
  const spine = new Set()
  /** @type {string | undefined} */
  let s = initial
  while (s !== undefined && !spine.has(s) && spine.size < out.size) {
    spine.add(s)
    s = (out.get(s) ?? []).find((e) => e.kind === 'forward')?.to
  }
  return spine
}

/**
 * Each leaf's column (its rank) and row: in each column the state on the happy path in the
 * middle row, the others alternately above and below it in the order first reached.
 * @param {ReadonlyArray<string>} leaves
 * @param {ReadonlyMap<string, number>} rank
 * @param {ReadonlyMap<string, number>} order
 * @param {ReadonlySet<string>} spine
 */
const placeColumns = (leaves, rank, order, spine) => {
  /** @type {string[][]} */
  const columns = []
  for (const id of leaves) {
    const c = rank.get(id) ?? 0
    for (let i = columns.length; i <= c; i++) columns.push([])
    columns[c]?.push(id)
  }
  /** @type {Map<string, NodePos>} */
  const pos = new Map()
  columns.forEach((col, c) => {
    col.sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))
    const middle = col.find((id) => spine.has(id))
    const arranged = middle === undefined ? [] : [middle]
    col
      .filter((id) => id !== middle)
      .forEach((id, i) => {
        if (middle === undefined || i % 2 !== 0) arranged.push(id)
        else arranged.unshift(id)
      })
    const at = middle === undefined ? (arranged.length - 1) / 2 : arranged.indexOf(middle)
    arranged.forEach((id, i) => {
      pos.set(id, { x: c * (CHART.nodeW + CHART.gap), y: (i - at) * CHART.rowH, col: c })
    })
  })
  return { columns: columns.length, pos }
}

/**
 * The box around a compound state's children, with room for its name on top.
 * @param {MachineNode} g
 * @param {ReadonlyMap<string, NodePos>} pos
 * @returns {GroupBox}
 */
const groupBoxOf = (g, pos) => {
  const ps = g.children.map((c) => get(pos, c))
  const [y0, y1] = span(ps.map((p) => p.y))
  const first = ps[0] ?? { x: 0, col: 0 }
  return {
    id: g.id,
    key: g.key,
    x: first.x - CHART.groupPad,
    y: y0 - CHART.groupPad - CHART.groupHead,
    w: CHART.nodeW + 2 * CHART.groupPad,
    h: y1 - y0 + CHART.nodeH + 2 * CHART.groupPad + CHART.groupHead,
    col: first.col
  }
}

/**
 * Gives a lane to each edge that skips a column, or goes back more than one: above or below the
 * columns it spans, shorter ones nearer the chart. Marks the edges drawn beside their way back.
 * Returns how far up and down the chart reaches.
 * @param {ReadonlyArray<ChartEdge>} edges
 * @param {ReadonlyMap<string, NodePos>} pos
 * @param {number} columns
 * @param {ReadonlyArray<MachineNode>} groups
 * @param {ReadonlyArray<GroupBox>} groupBoxes
 */
const assignLanes = (edges, pos, columns, groups, groupBoxes) => {
  // How far each column reaches up and down (a compound state's box included).
  const colTop = Array.from({ length: columns }, () => Number.POSITIVE_INFINITY)
  const colBottom = Array.from({ length: columns }, () => Number.NEGATIVE_INFINITY)
  const reach = (/** @type {number} */ c, /** @type {number} */ top, /** @type {number} */ bottom) => {
    colTop[c] = Math.min(colTop[c] ?? top, top)
    colBottom[c] = Math.max(colBottom[c] ?? bottom, bottom)
  }
  for (const p of pos.values()) reach(p.col, p.y, p.y + CHART.nodeH)
  for (const b of groupBoxes) reach(b.col, b.y, b.y + b.h)
  const inGroup = new Set(groups.flatMap((g) => g.children))
  /**
   * A state at the top (bottom) of its column, outside any box, can be left or entered from above (below).
   * @param {string} id
   * @param {boolean} up
   */
  const cap = (id, up) => {
    if (inGroup.has(id)) return false
    const p = get(pos, id)
    return up ? p.y === colTop[p.col] : p.y + CHART.nodeH === colBottom[p.col]
  }
  const colOf = (/** @type {string} */ id) => get(pos, id).col

  const long = edges.filter((e) => {
    const cols = colOf(e.to) - colOf(e.from)
    return e.kind !== 'self' && ((e.kind === 'forward' && cols >= 2) || (e.kind !== 'forward' && cols !== -1))
  })
  long.sort((a, b) => Math.abs(colOf(a.to) - colOf(a.from)) - Math.abs(colOf(b.to) - colOf(b.from)))
  const depth = { up: 0, down: 0 }
  let minY = Math.min(...colTop)
  let maxY = Math.max(...colBottom)
  for (const e of edges) if (e.kind === 'self') minY = Math.min(minY, get(pos, e.from).y - 44)
  for (const e of long) {
    const to = get(pos, e.to)
    const up = e.kind === 'forward' ? to.y <= 0 : to.y < 0
    const k = up ? ++depth.up : ++depth.down
    const [c0, c1] = span([colOf(e.from), to.col])
    const spanned = up ? colTop.slice(c0, c1 + 1) : colBottom.slice(c0, c1 + 1)
    const edge = up ? Math.min(...spanned) : Math.max(...spanned)
    const y = up ? edge - 20 - (k - 1) * CHART.lane : edge + 20 + (k - 1) * CHART.lane
    e.lane = { up, depth: k, y, fromCap: cap(e.from, up), toCap: cap(e.to, up) }
    minY = Math.min(minY, y - 28)
    maxY = Math.max(maxY, y + 28)
  }
  const pairs = new Set(edges.map((e) => `${e.from}>${e.to}`))
  for (const e of edges) e.paired = e.lane === undefined && e.kind !== 'self' && pairs.has(`${e.to}>${e.from}`)
  return { minY, maxY }
}

/**
 * Lays out a machine's graph: each leaf state's position (its column and row), the compound
 * states' boxes, each drawn edge's kind and, for an edge that skips a column, its lane.
 * @param {MachineGraph} graph
 * @returns {MachineLayout}
 */
export const layoutMachine = (graph) => {
  /** @type {Map<string, MachineNode>} */
  const byId = new Map(graph.nodes.map((n) => [n.id, n]))
  /** @param {string} id */
  const leafOf = (id) => {
    let n = byId.get(id)
    while (n !== undefined && n.children.length > 0) n = byId.get(n.children[0] ?? '')
    return n === undefined ? id : n.id
  }
  const leaves = graph.nodes.filter((n) => n.children.length === 0).map((n) => n.id)
  const { edges, anyState } = drawnEdges(graph, leafOf)
  /** @type {Map<string, ChartEdge[]>} */
  const out = new Map(leaves.map((id) => [id, []]))
  for (const e of edges) out.get(e.from)?.push(e)

  const initial = leafOf(graph.initial)
  const order = classifyEdges(leaves, initial, out)
  const groups = graph.nodes.filter((n) => n.children.length > 0 && n.children.every((c) => byId.get(c)?.children.length === 0))
  const { columns, pos } = placeColumns(leaves, rankLeaves(leaves, edges, groups), order, happyPath(initial, out))
  const groupBoxes = groups.map((g) => groupBoxOf(g, pos))
  const { minY, maxY } = assignLanes(edges, pos, columns, groups, groupBoxes)
  return {
    leaves,
    byId,
    pos,
    edges,
    groups: groupBoxes,
    anyState,
    initial,
    minY: minY - CHART.pad / 2,
    width: columns * CHART.nodeW + (columns - 1) * CHART.gap + 2 * CHART.pad + 20,
    height: maxY - minY + CHART.pad,
    offsetX: CHART.pad + 16
  }
}
