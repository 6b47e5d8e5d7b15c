// @ts-check
/** What the state chart draws, in its SVG coordinates, with no DOM: each state, box, edge path and label anchor of a layout. */

import { CHART } from './chart-layout.js'

/** @import { ChartEdge, GroupBox, Lane, MachineLayout } from './chart-layout.js' */
/** @import { MachineNode } from '../src/inspector/machine-graph.js' */

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

/**
 * A state's position in the chart's SVG coordinates.
 * @param {MachineLayout} L
 * @param {string} id
 */
const placed = (L, id) => {
  const p = L.pos.get(id)
  if (p === undefined) throw new Error(`the chart has no state ${id}`)
  return { x: p.x + L.offsetX, y: p.y - L.minY }
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
  const P = (/** @type {string} */ id) => placed(L, id)
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
    nodes: L.leaves.flatMap((id) => {
      const node = L.byId.get(id)
      return node === undefined ? [] : [{ id, node, ...P(id) }]
    }),
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
