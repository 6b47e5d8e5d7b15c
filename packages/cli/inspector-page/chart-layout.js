// @ts-check
/**
 * The state chart's geometry, with no DOM: where `GET /api/machine`'s states, compound boxes,
 * edges and edge labels go. States are ranked left to right by the longest path from the initial
 * state, ignoring back edges; the first way out of each state (the happy path) runs straight
 * through the middle row; compound states are boxes around their children; edges that skip a
 * column run in lanes above or below the chart. Labels are moved off each other and off the
 * states by `placeLabels`, given their measured boxes (the page measures the rendered text).
 */

/** @import { MachineEdge, MachineGraph, MachineNode } from '../src/inspector/machine-graph.js' */

/**
 * @typedef {{ readonly x0: number, readonly y0: number, readonly x1: number, readonly y1: number }} Box
 * A rectangle by its corners (x0 < x1, y0 < y1), in the chart's SVG coordinates.
 */
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
/**
 * Where an edge's label is anchored: its lines stack up from (x, y), or down from it when below.
 * @typedef {{ readonly x: number, readonly y: number, readonly below: boolean, readonly anchor: 'middle' | 'end' }} LabelAnchor
 */
/**
 * @typedef {object} DrawnEdge
 * @property {ChartEdge} edge
 * @property {string} d The SVG path.
 * @property {LabelAnchor} label
 * @property {'x' | 'y'} slide A lane's label slides along its lane, any other up or down.
 */
/**
 * @typedef {object} ChartGeometry
 * @property {number} width
 * @property {number} height
 * @property {ReadonlyArray<{ readonly id: string, readonly node: MachineNode, readonly x: number, readonly y: number }>} nodes
 * @property {ReadonlyArray<GroupBox>} groups
 * @property {ReadonlyArray<DrawnEdge>} edges
 * @property {{ readonly x: number, readonly y: number }} start The initial state's left middle.
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

/**
 * A path through points with rounded corners.
 * @param {ReadonlyArray<readonly [number, number]>} points
 */
const rounded = (points) => {
  const [first] = points
  const last = points[points.length - 1]
  if (first === undefined || last === undefined) return ''
  let d = `M${first[0]} ${first[1]}`
  for (let i = 1; i < points.length - 1; i++) {
    const [p, q, n] = [points[i - 1] ?? first, points[i] ?? first, points[i + 1] ?? last]
    const r = Math.min(8, (Math.abs(q[0] - p[0]) + Math.abs(q[1] - p[1])) / 2, (Math.abs(n[0] - q[0]) + Math.abs(n[1] - q[1])) / 2)
    const a = [q[0] - Math.sign(q[0] - p[0]) * r, q[1] - Math.sign(q[1] - p[1]) * r]
    const b = [q[0] + Math.sign(n[0] - q[0]) * r, q[1] + Math.sign(n[1] - q[1]) * r]
    d += ` L${a[0]} ${a[1]} Q${q[0]} ${q[1]} ${b[0]} ${b[1]}`
  }
  return `${d} L${last[0]} ${last[1]}`
}

/**
 * The route of an edge in a lane: out of the source's top or bottom when nothing is in the way,
 * else out of its side into the gap beside it; along the lane; into the target the same way.
 * @param {Lane} lane
 * @param {{ x: number, y: number }} a
 * @param {{ x: number, y: number }} b
 * @param {number} oy
 * @returns {{ d: string, label: LabelAnchor }}
 */
const laneRoute = (lane, a, b, oy) => {
  const W = CHART.nodeW
  const H = CHART.nodeH
  const { up, depth: k } = lane
  const laneY = lane.y + oy
  const dir = b.x >= a.x ? 1 : -1
  /** @type {Array<[number, number]>} */
  const pts = []
  const capX = (/** @type {{ x: number }} */ p, /** @type {{ x: number }} */ other) => p.x + W / 2 - Math.sign(other.x - p.x || 1) * k * 12
  if (lane.fromCap) {
    const sx = capX(a, b)
    pts.push([sx, up ? a.y : a.y + H], [sx, laneY])
  } else {
    const side = dir > 0 ? a.x + W : a.x
    const gx = side + dir * (12 + k * 6)
    const sy = a.y + H / 2 + (up ? -6 : 6)
    pts.push([side, sy], [gx, sy], [gx, laneY])
  }
  if (lane.toCap) {
    const tx = capX(b, a)
    pts.push([tx, laneY], [tx, up ? b.y : b.y + H])
  } else {
    const side = dir > 0 ? b.x : b.x + W
    const gx = side - dir * (12 + k * 6)
    const ty = b.y + H / 2 + (up ? -6 : 6)
    pts.push([gx, laneY], [gx, ty], [side, ty])
  }
  const along = pts.filter((p) => p[1] === laneY)
  const lx = ((along[0]?.[0] ?? 0) + (along[along.length - 1]?.[0] ?? 0)) / 2
  return { d: rounded(pts), label: { x: lx, y: up ? laneY + 2 : laneY - 2, below: !up, anchor: 'middle' } }
}

/**
 * Everything the chart draws, in its SVG coordinates: the states, the compound boxes, each
 * edge's path and its label's anchor, the initial state's entry.
 * @param {MachineLayout} L
 * @returns {ChartGeometry}
 */
export const chartGeometry = (L) => {
  const W = CHART.nodeW
  const H = CHART.nodeH
  const ox = L.offsetX
  const oy = -L.minY
  const P = (/** @type {string} */ id) => {
    const p = get(L.pos, id)
    return { x: p.x + ox, y: p.y + oy }
  }
  /** @type {DrawnEdge[]} */
  const edges = L.edges.map((e) => {
    const a = P(e.from)
    const b = P(e.to)
    if (e.kind === 'self') {
      // On the left of the top side: the middle is where lanes leave upwards.
      const cx = a.x + 34
      return {
        edge: e,
        d: `M${cx - 16} ${a.y} C${cx - 24} ${a.y - 34} ${cx + 24} ${a.y - 34} ${cx + 16} ${a.y}`,
        label: { x: cx, y: a.y - 28, below: false, anchor: 'middle' },
        slide: 'y'
      }
    }
    if (e.lane !== undefined) return { edge: e, ...laneRoute(e.lane, a, b, oy), slide: 'x' }
    // Between neighbouring columns: a forward edge and its way back run side by side, the
    // forward one above. Labels sit at the right end of the gap, where the curves fan out.
    const back = e.kind !== 'forward'
    const dy = back ? 7 : e.paired ? -7 : 0
    const sx = back ? a.x : a.x + W
    const tx = back ? b.x + W : b.x
    const sy = a.y + H / 2 + dy
    const ty = b.y + H / 2 + dy
    const mx = (sx + tx) / 2
    return {
      edge: e,
      d: `M${sx} ${sy} C${mx} ${sy} ${mx} ${ty} ${tx} ${ty}`,
      label: back ? { x: sx - 12, y: sy, below: true, anchor: 'end' } : { x: tx - 12, y: ty, below: false, anchor: 'end' },
      slide: 'y'
    }
  })
  const start = P(L.initial)
  return {
    width: L.width,
    height: L.height,
    nodes: L.leaves.map((id) => ({ id, node: get(L.byId, id), ...P(id) })),
    groups: L.groups.map((g) => ({ ...g, x: g.x + ox, y: g.y + oy })),
    edges,
    start: { x: start.x, y: start.y + H / 2 }
  }
}

/**
 * The y of a label's first line: its lines stack up from the anchor, or hang below it.
 * @param {LabelAnchor} label
 * @param {number} lines
 */
export const firstLineY = (label, lines) => (label.below ? label.y + 12 : label.y - 5 - (lines - 1) * CHART.lineH)

/** @param {Box} a @param {Box} b */
export const overlaps = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1

/**
 * @typedef {object} Placement
 * @property {number} dx
 * @property {number} dy
 * @property {Box} box Where the label's box ends up.
 */

/**
 * Moves edge labels off each other and off the states: each label in turn, the first place near
 * its own that hits nothing placed before it (a lane's label slides along its lane, any other up
 * or down). One with nowhere free near it goes below everything placed so far. Boxes are padded
 * by 2 units on each side before they are compared.
 * @param {ReadonlyArray<{ readonly box: Box, readonly slide: 'x' | 'y' }>} labels
 * @param {ReadonlyArray<Box>} states
 * @returns {Placement[]}
 */
export const placeLabels = (labels, states) => {
  const pad = 2
  /** @param {Box} b @returns {Box} */
  const padded = (b) => ({ x0: b.x0 - pad, y0: b.y0 - pad, x1: b.x1 + pad, y1: b.y1 + pad })
  const placed = states.map(padded)
  return labels.map(({ box: unpadded, slide }) => {
    const box = padded(unpadded)
    const along = slide === 'x'
    const step = along ? 12 : 4
    /** @type {Placement | undefined} */
    let chosen
    for (let i = 0; i <= 60 && chosen === undefined; i++) {
      const d = (i % 2 === 0 ? 1 : -1) * Math.ceil(i / 2) * step
      const dx = along ? d : 0
      const dy = along ? 0 : d
      const moved = { x0: box.x0 + dx, y0: box.y0 + dy, x1: box.x1 + dx, y1: box.y1 + dy }
      if (!placed.some((p) => overlaps(moved, p))) chosen = { dx, dy, box: moved }
    }
    if (chosen === undefined) {
      const low = Math.max(...placed.map((p) => p.y1))
      chosen = { dx: 0, dy: low - box.y0, box: { x0: box.x0, y0: low, x1: box.x1, y1: low + box.y1 - box.y0 } }
    }
    placed.push(chosen.box)
    return chosen
  })
}

/**
 * The view box that holds `view` and every box: the chart grows if a label moved past its edge.
 * @param {{ readonly x: number, readonly y: number, readonly width: number, readonly height: number }} view
 * @param {ReadonlyArray<Box>} boxes
 */
export const grownView = (view, boxes) => {
  const x0 = Math.min(view.x, ...boxes.map((b) => b.x0))
  const y0 = Math.min(view.y, ...boxes.map((b) => b.y0))
  const x1 = Math.max(view.x + view.width, ...boxes.map((b) => b.x1))
  const y1 = Math.max(view.y + view.height, ...boxes.map((b) => b.y1))
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 }
}
