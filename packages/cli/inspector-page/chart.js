// @ts-check
/** Draws the state chart from its geometry (chart-geometry.js), then moves its labels apart as measured (label-placement.js). */

import { chartGeometry, firstLineY } from './chart-geometry.js'
import { CHART } from './chart-layout.js'
import { svg } from './dom.js'
import { grownView, placeLabels } from './label-placement.js'

/** @import { DrawnEdge } from './chart-geometry.js' */
/** @import { MachineLayout } from './chart-layout.js' */
/** @import { Box } from './label-placement.js' */

/**
 * An edge's events, one per line, stacked up from its anchor or down from it.
 * @param {DrawnEdge} drawn
 */
const edgeLabel = ({ edge, label }) => {
  const first = firstLineY(label, edge.events.length)
  return svg(
    'text',
    { x: label.x, y: first, 'text-anchor': label.anchor },
    edge.events.map((ev, i) => svg('tspan', { x: label.x, dy: i === 0 ? 0 : CHART.lineH, text: ev }))
  )
}

/**
 * Draws the chart: `lit` is the state to highlight, `visited` the states the run passed through
 * up to it, `taken` the transition that led there.
 * @param {MachineLayout} layout
 * @param {string} lit
 * @param {ReadonlySet<string>} visited
 * @param {{ readonly from: string, readonly to: string } | null} taken
 * @returns {SVGSVGElement}
 */
export const drawChart = (layout, lit, visited, taken) => {
  const geometry = chartGeometry(layout)
  const W = CHART.nodeW
  const H = CHART.nodeH
  /** @type {SVGElement[]} */
  const parts = []
  parts.push(
    svg('defs', {}, [
      svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, [
        svg('path', { d: 'M0 0 L10 5 L0 10 z', fill: '#b3bac6' })
      ]),
      svg('marker', { id: 'arrow-taken', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' }, [
        svg('path', { d: 'M0 0 L10 5 L0 10 z', fill: '#2f6fed' })
      ])
    ])
  )
  for (const g of geometry.groups) {
    const active = lit.startsWith(`${g.id}.`)
    parts.push(
      svg('g', { class: `state-group${active ? ' active' : ''}`, 'data-state': g.id }, [
        svg('rect', { x: g.x, y: g.y, width: g.w, height: g.h, rx: 12 }),
        svg('text', { x: g.x + 12, y: g.y + 16, text: g.key })
      ])
    )
  }
  /** @type {SVGElement[]} */
  const labels = []
  for (const drawn of geometry.edges) {
    const e = drawn.edge
    const isTaken = taken !== null && taken.from === e.from && taken.to === e.to
    parts.push(
      svg('g', { class: `edge${isTaken ? ' taken' : ''}`, 'data-from': e.from, 'data-to': e.to }, [
        svg('title', { text: e.detail.join('\n') }),
        svg('path', { d: drawn.d, 'marker-end': isTaken ? 'url(#arrow-taken)' : 'url(#arrow)' })
      ])
    )
    labels.push(
      svg('g', { class: `edge edge-label${isTaken ? ' taken' : ''}`, 'data-slide': drawn.slide }, [
        svg('title', { text: e.detail.join('\n') }),
        edgeLabel(drawn)
      ])
    )
  }
  const { start } = geometry
  parts.push(svg('circle', { class: 'start-dot', cx: start.x - 20, cy: start.y, r: 5 }))
  parts.push(svg('path', { d: `M${start.x - 15} ${start.y} L${start.x} ${start.y}`, stroke: '#1d2330', 'stroke-width': 1.2, 'marker-end': 'url(#arrow)' }))
  for (const { id, node, x, y } of geometry.nodes) {
    const cls = `state-node${node.type === 'final' ? ' final' : ''}${visited.has(id) ? ' visited' : ''}${id === lit ? ' current' : ''}`
    parts.push(
      svg('g', { class: cls, 'data-state': id, 'data-testid': 'state-node' }, [
        svg('title', { text: id }),
        svg('rect', { x, y, width: W, height: H, rx: node.type === 'final' ? 17 : 8 }),
        svg('text', { x: x + W / 2, y: y + H / 2, text: node.key })
      ])
    )
  }
  const { width, height } = geometry
  return svg(
    'svg',
    {
      class: 'chart',
      'data-testid': 'chart',
      'data-current': lit,
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: 'img',
      'aria-label': 'state chart of the run machine'
    },
    [...parts, ...labels]
  )
}

/** @param {SVGGraphicsElement} el @returns {Box} */
const boxOf = (el) => {
  const b = el.getBBox()
  return { x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height }
}

/**
 * Moves the edge labels off each other and off the states once the chart is in the page, where
 * their real text boxes can be measured (label-placement.js), and grows the chart if
 * a label moved past its edge.
 * @param {SVGSVGElement} chart
 */
export const untangleLabels = (chart) => {
  const states = [...chart.querySelectorAll('.state-node rect')].filter((el) => el instanceof SVGGraphicsElement).map(boxOf)
  /** @type {Array<{ group: Element, box: Box, slide: 'x' | 'y' }>} */
  const labels = []
  for (const group of chart.querySelectorAll('.edge-label')) {
    const text = group.querySelector('text')
    if (text !== null) labels.push({ group, box: boxOf(text), slide: group.getAttribute('data-slide') === 'x' ? 'x' : 'y' })
  }
  const placements = placeLabels(labels, states)
  placements.forEach((p, i) => {
    if (p.dx !== 0 || p.dy !== 0) labels[i]?.group.setAttribute('transform', `translate(${p.dx} ${p.dy})`)
  })
  const vb = chart.viewBox.baseVal
  const view = grownView(
    vb,
    placements.map((p) => p.box)
  )
  if (view.x !== vb.x || view.y !== vb.y || view.width !== vb.width || view.height !== vb.height) {
    chart.setAttribute('viewBox', `${view.x} ${view.y} ${view.width} ${view.height}`)
    chart.setAttribute('width', String(view.width))
    chart.setAttribute('height', String(view.height))
  }
}
