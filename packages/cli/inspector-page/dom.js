// @ts-check
/** Building the page's elements: the one way the page makes DOM, so text is never parsed as HTML. */

const SVG_NS = 'http://www.w3.org/2000/svg'

/** @typedef {Node | string | number | null | undefined | false} Leaf */
/**
 * What an element may hold: nodes, text, and lists of them (two deep, as JSDoc types cannot
 * recurse); null, undefined and false are left out, so a part that does not apply can be
 * written inline as `cond ? part : null`.
 * @typedef {Leaf | ReadonlyArray<Leaf | ReadonlyArray<Leaf>>} Child
 */
/**
 * Attributes: `text` sets the text content, `on...` adds a listener, `true` sets an empty
 * attribute, and null, undefined and false leave it out.
 * @typedef {Readonly<Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>>} Attrs
 */

/**
 * @param {Element} el
 * @param {Attrs} attrs
 * @param {ReadonlyArray<Child>} children
 */
const fill = (el, attrs, children) => {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue
    if (typeof v === 'function') el.addEventListener(k.slice(2), v)
    else if (k === 'text') el.textContent = String(v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  /** @param {Child} c @returns {void} */
  const add = (c) => {
    if (c === undefined || c === null || c === false) return
    if (c instanceof Node) el.appendChild(c)
    else if (typeof c === 'string' || typeof c === 'number') el.appendChild(document.createTextNode(String(c)))
    else c.forEach(add)
  }
  children.forEach(add)
}

/**
 * An HTML element: h('div', {class: 'x', text: 'hi', onclick: f}, [children]).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {ReadonlyArray<Child>} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export const h = (tag, attrs = {}, children = []) => {
  const el = document.createElement(tag)
  fill(el, attrs, children)
  return el
}

/**
 * An SVG element, as `h` makes HTML ones.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {ReadonlyArray<Child>} [children]
 * @returns {SVGElementTagNameMap[K]}
 */
export const svg = (tag, attrs = {}, children = []) => {
  const el = document.createElementNS(SVG_NS, tag)
  fill(el, attrs, children)
  return el
}

/**
 * An element of the page's own markup (packages/cli/src/inspector/page.ts), which is always
 * there, of the kind the page's code takes it for.
 * @template {HTMLElement} E
 * @param {string} id
 * @param {new () => E} kind
 * @returns {E}
 */
export const byIdAs = (id, kind) => {
  const el = document.getElementById(id)
  if (!(el instanceof kind)) throw new Error(`the page has no ${kind.name} #${id}`)
  return el
}

/** @param {string} id */
export const byId = (id) => byIdAs(id, HTMLElement)
