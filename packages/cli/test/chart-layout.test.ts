import { describe, expect, it } from 'vitest'
import { type ChartGeometry, chartGeometry, firstLineY } from '../inspector-page/chart-geometry.js'
import { CHART, layoutMachine } from '../inspector-page/chart-layout.js'
import { type Box, overlaps, placeLabels } from '../inspector-page/label-placement.js'
import { type MachineGraph, runMachineGraph } from '../src/inspector/machine-graph.js'

/**
 * The labels' text boxes as the page's font draws them (9.5 px monospace, docs/inspector.md):
 * a little wider and taller than Chromium measures them, so a layout that passes here passes there.
 */
const FONT = { charW: 5.9, ascent: 9.5, descent: 3 }

const labelBoxes = (geometry: ChartGeometry): Array<{ box: Box; slide: 'x' | 'y' }> =>
  geometry.edges.map(({ edge, label, slide }) => {
    const width = Math.max(...edge.events.map((e) => e.length)) * FONT.charW
    const x0 = label.anchor === 'middle' ? label.x - width / 2 : label.x - width
    const first = firstLineY(label, edge.events.length)
    return { box: { x0, y0: first - FONT.ascent, x1: x0 + width, y1: first + (edge.events.length - 1) * CHART.lineH + FONT.descent }, slide }
  })

const stateBoxes = (geometry: ChartGeometry): Box[] => geometry.nodes.map((n) => ({ x0: n.x, y0: n.y, x1: n.x + CHART.nodeW, y1: n.y + CHART.nodeH }))

const pairsOverlapping = (boxes: ReadonlyArray<Box>): Array<[number, number]> =>
  boxes.flatMap((a, i) => boxes.slice(i + 1).flatMap((b, j): Array<[number, number]> => (overlaps(a, b) ? [[i, i + 1 + j]] : [])))

const graph = (nodes: ReadonlyArray<string>, edges: ReadonlyArray<[string, string, string]>): MachineGraph => ({
  id: 'test',
  initial: nodes[0]!,
  nodes: nodes.map((id) => ({ id, key: id, parent: null, type: 'atomic', children: [] })),
  edges: edges.map(([from, event, to]) => ({ from, event, to }))
})

describe("the inspector chart's layout", () => {
  it("places the run machine's states apart, its compound states around their children, and every label off the others and off the states", () => {
    const machine = runMachineGraph()
    const geometry = chartGeometry(layoutMachine(machine))
    const states = stateBoxes(geometry)
    expect(geometry.nodes.map((n) => n.id).sort()).toEqual(
      machine.nodes
        .filter((n) => n.children.length === 0)
        .map((n) => n.id)
        .sort()
    )
    expect(pairsOverlapping(states)).toEqual([])
    for (const group of geometry.groups) {
      for (const child of machine.nodes.find((n) => n.id === group.id)!.children) {
        const box = states[geometry.nodes.findIndex((n) => n.id === child)]!
        expect(box.x0 >= group.x && box.x1 <= group.x + group.w && box.y0 >= group.y && box.y1 <= group.y + group.h, `${child} inside ${group.id}`).toBe(true)
      }
    }
    // Every state and label inside the chart's own box.
    for (const box of states) expect(box.x0 >= 0 && box.y0 >= 0 && box.x1 <= geometry.width && box.y1 <= geometry.height).toBe(true)

    const labels = labelBoxes(geometry)
    expect(labels.length).toBeGreaterThan(15)
    // As drawn before placement the labels collide: what placeLabels is there to undo.
    expect(pairsOverlapping([...states, ...labels.map((l) => l.box)]).length).toBeGreaterThan(0)
    const placed = placeLabels(labels, states)
    const finals = placed.map((p) => p.box)
    expect(pairsOverlapping(finals)).toEqual([])
    expect(finals.flatMap((label, i) => states.filter((s) => overlaps(label, s)).map(() => geometry.edges[i]!.edge.events.join(',')))).toEqual([])
    placed.forEach((p, i) => {
      // A lane's label slides along its lane, any other up or down; none is sent far off.
      if (labels[i]!.slide === 'x') expect(p.dy).toBe(0)
      else expect(p.dx).toBe(0)
      expect(Math.abs(p.dx) + Math.abs(p.dy)).toBeLessThanOrEqual(120)
    })
  })

  it('is deterministic: the same graph gives the same geometry and placements, whatever was laid out before', () => {
    const once = () => {
      const geometry = chartGeometry(layoutMachine(structuredClone(runMachineGraph())))
      return { geometry, placed: placeLabels(labelBoxes(geometry), stateBoxes(geometry)) }
    }
    const first = JSON.stringify(once())
    chartGeometry(layoutMachine(graph(['a', 'b'], [['a', 'GO', 'b']])))
    expect(JSON.stringify(once())).toBe(first)
  })

  it('ranks states by the longest path from the initial one, keeps the happy path on the middle row, and runs long and back edges in lanes', () => {
    const layout = layoutMachine(
      graph(
        ['start', 'work', 'side', 'done'],
        [
          ['start', 'BEGIN', 'work'],
          ['start', 'DETOUR', 'side'],
          ['work', 'FINISH', 'done'],
          ['side', 'RETURN', 'work'],
          ['done', 'AGAIN', 'start'],
          ['work', 'RETRY', 'work'],
          ['start', 'SKIP', 'done']
        ]
      )
    )
    const at = (id: string) => layout.pos.get(id)!
    // side -> work makes work the third column: the longest path, not the first edge, ranks it.
    expect([at('start').col, at('side').col, at('work').col, at('done').col]).toEqual([0, 1, 2, 3])
    expect(at('work').x).toBe(2 * (CHART.nodeW + CHART.gap))
    expect([at('start').y, at('side').y]).toEqual([0, 0])
    const edge = (from: string, to: string) => layout.edges.find((e) => e.from === from && e.to === to)!
    expect(edge('done', 'start').kind).toBe('back')
    expect(edge('work', 'work').kind).toBe('self')
    expect(edge('start', 'work').kind).toBe('forward')
    // Skipping columns (start -> done, done -> start, start -> work) runs in lanes; neighbours do not.
    expect(edge('start', 'done').lane).toBeDefined()
    expect(edge('done', 'start').lane).toBeDefined()
    expect(edge('start', 'work').lane).toBeDefined()
    expect(edge('work', 'done').lane).toBeUndefined()
    expect(edge('side', 'work').lane).toBeUndefined()
    // Shorter lanes run nearer the chart.
    const lanes = layout.edges.filter((e) => e.lane?.up === true).sort((a, b) => a.lane!.depth - b.lane!.depth)
    expect(lanes.map((e) => Math.abs(at(e.to).col - at(e.from).col))).toEqual([...lanes.map((e) => Math.abs(at(e.to).col - at(e.from).col))].sort())
  })

  it('moves a label off a state and off a label placed before it, along its own axis', () => {
    const state = { x0: 0, y0: 0, x1: 100, y1: 30 }
    const placed = placeLabels(
      [
        { box: { x0: 10, y0: 10, x1: 60, y1: 20 }, slide: 'y' },
        { box: { x0: 10, y0: 10, x1: 60, y1: 20 }, slide: 'y' },
        { box: { x0: 200, y0: 0, x1: 260, y1: 10 }, slide: 'x' },
        { box: { x0: 200, y0: 0, x1: 260, y1: 10 }, slide: 'x' }
      ],
      [state]
    )
    const [a, b, c, d] = placed.map((p) => p.box)
    expect(pairsOverlapping([state, a!, b!, c!, d!])).toEqual([])
    expect(placed.map((p) => [p.dx === 0, p.dy === 0])).toEqual([
      [true, false],
      [true, false],
      [true, true],
      [false, true]
    ])
  })
})
