// @ts-check
/**
 * Moving the chart's edge labels off each other and off the states, given their boxes: the page
 * measures the rendered text (chart.js), the tests model it.
 */

/**
 * @typedef {{ readonly x0: number, readonly y0: number, readonly x1: number, readonly y1: number }} Box
 * A rectangle by its corners (x0 < x1, y0 < y1), in the chart's SVG coordinates.
 */
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
