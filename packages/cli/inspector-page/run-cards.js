// @ts-check
/** The run view's cards: its head and actions, the state chart with time travel, the timeline, steps, policy events and run tree. */

import { cancelRun, errorOf, forkRun, resumeRun } from './api.js'
import { drawChart } from './chart.js'
import { h } from './dom.js'
import { badge, clock, json, runHref, short, usageText, when } from './format.js'
import { page, pastView, S, travel, viewedSeq } from './state.js'

/** @import { RunView } from '../src/inspector/run-view.js' */

/** Statuses a run does not leave. */
const FINAL = ['succeeded', 'failed', 'cancelled', 'timed_out', 'step_cap']

/** @param {string} runId @param {'resume' | 'cancel'} action */
const runAction = async (runId, action) => {
  const key = `run:${runId}`
  S.busy[key] = true
  delete S.errors[key]
  page.renderDetail()
  const reply = action === 'resume' ? await resumeRun(runId) : await cancelRun(runId)
  delete S.busy[key]
  const error = errorOf(reply)
  if (error !== undefined) S.errors[key] = error
  if (S.runId === runId) await page.loadRun(runId)
}

/** Resume and Cancel, through the same use cases as agentvisor resume and cancel. @param {RunView} run */
const runActions = (run) => {
  const r = run.run
  const ended = FINAL.includes(r.status)
  const busy = S.busy[`run:${r.id}`] === true
  const open = run.approvals.some((a) => a.status === 'pending')
  const resumable = !ended && !open && (run.interrupted || r.status === 'awaiting_approval' || r.status === 'awaiting_input')
  const past = pastView()
  const error = S.errors[`run:${r.id}`]
  return h('div', { class: 'actions run-actions', 'data-testid': 'run-actions' }, [
    h('button', {
      'data-testid': 'run-resume',
      disabled: busy || past || !resumable,
      title: resumable ? 'drive the run on in the inspector, as agentvisor resume does' : 'nothing to resume',
      onclick: () => void runAction(r.id, 'resume'),
      text: 'Resume'
    }),
    h('button', {
      class: 'deny',
      'data-testid': 'run-cancel',
      disabled: busy || past || ended,
      title: 'cancel the run, as agentvisor cancel does',
      onclick: () => void runAction(r.id, 'cancel'),
      text: 'Cancel'
    }),
    past ? h('span', { class: 'none', 'data-testid': 'actions-off', text: 'actions are off while an earlier seq is shown' }) : null,
    error ? h('span', { class: 'approval-error', 'data-testid': 'run-action-error', text: error }) : null
  ])
}

/** @param {RunView} run */
export const head = (run) => {
  const r = run.run
  const link = (/** @type {string} */ runId, /** @type {string | undefined} */ testid) =>
    h('a', { href: runHref(runId), class: 'mono', 'data-testid': testid, text: short(runId) })
  return h('div', { class: 'run-head' }, [
    h('h1', { text: r.goal }),
    h('div', { class: 'facts' }, [
      h('span', { 'data-testid': 'run-status', 'data-status': r.status }, [badge(r.status)]),
      run.interrupted ? badge('interrupted') : null,
      h('span', {}, ['state ', h('code', { 'data-testid': 'run-state', text: run.state })]),
      h('span', {}, ['id ', h('code', { text: r.id })]),
      r.parentId ? h('span', {}, ['parent ', link(r.parentId, undefined)]) : null,
      r.forkedFrom ? h('span', { 'data-testid': 'forked-from' }, ['forked from ', link(r.forkedFrom.runId, undefined), ` at seq ${r.forkedFrom.seq}`]) : null,
      run.forks
        ? h('span', { 'data-testid': 'forks' }, ['forks ', run.forks.map((f, i) => [i > 0 ? ', ' : '', link(f.runId, 'fork-link'), ` (seq ${f.seq})`])])
        : null,
      h('span', { text: `created ${when(r.createdAt)}` }),
      h('span', { text: `updated ${when(r.updatedAt)}` }),
      r.usage ? h('span', { 'data-testid': 'run-usage', text: usageText(r.usage) + (r.treeUsage ? `; tree ${usageText(r.treeUsage)}` : '') }) : null
    ]),
    runActions(run),
    r.error ? h('div', { class: 'error-box', 'data-testid': 'run-error', text: `${r.error.kind}: ${r.error.message}` }) : null,
    run.output !== undefined
      ? h('div', { class: 'output-box', 'data-testid': 'run-output' }, [h('strong', { text: 'output ' }), h('code', { text: json(run.output) })])
      : null,
    run.turns.length > 1
      ? h(
          'div',
          { class: 'facts', 'data-testid': 'run-turns' },
          run.turns.slice(1).map((t) => h('span', { text: `turn ${t.turn} from step ${t.firstStep}${t.message ? `: ${t.message.slice(0, 120)}` : ''}` }))
        )
      : null
  ])
}

/** @param {string} runId @param {number} seq */
const forkAt = async (runId, seq) => {
  const key = `fork:${runId}`
  S.busy[key] = true
  delete S.errors[key]
  page.renderDetail()
  const reply = await forkRun(runId, seq)
  delete S.busy[key]
  if (!reply.ok) {
    S.errors[key] = errorOf(reply) ?? ''
    page.renderDetail()
    return
  }
  location.hash = runHref(reply.body.runId)
}

/** Fork from the seq shown: a new run from the state then (agentvisor fork RUN --at SEQ). @param {RunView} run @param {number} seq @param {string} state */
const forkButton = (run, seq, state) => {
  const forkable = seq > 0 && !/^(finished|awaitingChildren)/.test(state)
  return h('button', {
    'data-testid': 'fork-here',
    disabled: S.busy[`fork:${run.run.id}`] === true || !forkable,
    title: forkable
      ? 'a new run from the state shown, driven by the inspector (the workspace is not rewound)'
      : 'a run that had ended or waited for its children then cannot be forked there',
    onclick: () => void forkAt(run.run.id, seq),
    text: 'Fork from here'
  })
}

const anyStateNote = () => {
  if (!S.layout || S.layout.anyState.length === 0) return null
  return h('div', { class: 'any-state' }, [
    'From any state not finished: ',
    S.layout.anyState.map((e, i) => [i ? ', ' : '', h('code', { text: e.event }), ' to ', h('code', { text: e.to })])
  ])
}

/** The machine context persisted with the transition shown, its changed fields highlighted. @param {RunView} run @param {number} seq */
const contextChips = (run, seq) => {
  const context = seq > 0 ? run.snapshots[seq - 1]?.context : null
  if (!context || typeof context !== 'object') return null
  const before = seq > 1 ? run.snapshots[seq - 2]?.context : null
  /** @type {Record<string, unknown>} */
  const prev = before && typeof before === 'object' ? { ...before } : {}
  return h(
    'div',
    { class: 'context', 'data-testid': 'snapshot-context', title: 'the machine context persisted with this transition (changed fields highlighted)' },
    Object.entries(context).map(([k, v]) => {
      const changed = seq > 1 && json(prev[k]) !== json(v)
      return h('span', { class: changed ? 'changed' : '', text: `${k} ${v && typeof v === 'object' ? json(v.kind || v) : json(v)}` })
    })
  )
}

/** @param {RunView} run */
export const chartCard = (run) => {
  const n = run.snapshots.length
  const seq = viewedSeq(run)
  const lit = seq === 0 ? (S.machine ? S.machine.initial : 'dispatching') : (run.snapshots[seq - 1]?.state ?? '')
  const visited = new Set(run.snapshots.slice(0, seq).map((s) => s.state))
  if (S.layout) visited.add(S.layout.initial)
  const t = seq > 0 ? run.transitions[seq - 1] : undefined
  const chart = S.layout
    ? drawChart(S.layout, lit, visited, t ? { from: t.from, to: t.to } : null)
    : h('div', { class: 'none', text: 'loading the machine...' })
  const forkError = S.errors[`fork:${run.run.id}`]
  return h('div', { class: 'card' }, [
    h('div', { class: 'card-head' }, [
      h('h2', { text: 'State chart' }),
      h('div', { class: 'travel' }, [
        h('button', { 'data-testid': 'step-first', title: 'first state', disabled: seq === 0, onclick: () => travel(0), text: '|<' }),
        h('button', {
          'data-testid': 'step-back',
          title: 'one transition back (left arrow)',
          disabled: seq === 0,
          onclick: () => travel(viewedSeq(run) - 1),
          text: '< back'
        }),
        h('span', { class: 'viewing', 'data-testid': 'viewing-seq', 'data-seq': seq, 'data-latest': S.seq === null ? 'true' : 'false' }, [
          h('b', { text: seq === 0 ? 'start' : `seq ${seq}` }),
          ` of ${n}${S.seq === null ? ' (live)' : ''}`
        ]),
        h('button', {
          'data-testid': 'step-forward',
          title: 'one transition forward (right arrow)',
          disabled: seq >= n,
          onclick: () => travel(viewedSeq(run) + 1),
          text: 'forward >'
        }),
        h('button', { 'data-testid': 'step-latest', title: 'follow the latest state', disabled: S.seq === null, onclick: () => travel(n), text: 'latest >|' }),
        forkButton(run, seq, lit)
      ])
    ]),
    forkError ? h('div', { class: 'approval-error', 'data-testid': 'fork-error', text: forkError }) : null,
    h('div', { class: 'chart-wrap' }, [chart]),
    anyStateNote(),
    contextChips(run, seq)
  ])
}

/** @param {RunView} run */
export const timelineCard = (run) => {
  const seq = viewedSeq(run)
  /** @param {number} s @param {string} event @param {string} from @param {string} to @param {string} at */
  const row = (s, event, from, to, at) =>
    h(
      'tr',
      {
        class: `timeline-row${s === seq ? ' viewing' : ''}${s > seq ? ' future' : ''}`,
        'data-testid': 'timeline-row',
        'data-seq': s,
        onclick: () => travel(s)
      },
      [
        h('td', { class: 'num', text: s }),
        h('td', {}, [h('code', { text: event })]),
        h('td', { text: from }),
        h('td', { text: to }),
        h('td', { class: 'time', text: clock(at, true) })
      ]
    )
  const rows = [
    row(0, 'start', '', S.machine ? S.machine.initial : '', run.run.createdAt),
    ...run.transitions.map((t) => row(t.seq, t.event, t.from, t.to, t.at))
  ]
  return h('div', { class: 'card' }, [
    h('h2', { text: 'Timeline' }),
    h('div', { class: 'scroll timeline-scroll' }, [
      h('table', { 'data-testid': 'timeline' }, [
        h('thead', {}, [
          h(
            'tr',
            {},
            ['seq', 'event', 'from', 'to', 'at'].map((t) => h('th', { text: t }))
          )
        ]),
        h('tbody', {}, rows)
      ])
    ])
  ])
}

/** @param {RunView} run */
export const treeCard = (run) => {
  /** @param {RunView['tree']} n @returns {HTMLLIElement} */
  const node = (n) =>
    h('li', { class: n.id === run.run.id ? 'here' : '', 'data-testid': 'tree-node', 'data-run-id': n.id }, [
      h('div', {}, [
        h('a', { href: runHref(n.id), class: 'mono', 'data-testid': 'child-link', text: short(n.id) }),
        badge(n.status),
        h('span', { class: 'goal', text: n.goal })
      ]),
      n.children.length ? h('ul', {}, n.children.map(node)) : null
    ])
  const alone = run.tree.children.length === 0
  return h('div', { class: 'card' }, [
    h('h2', { text: 'Run tree' }),
    alone ? h('div', { class: 'none', text: 'No child runs.' }) : h('ul', { class: 'tree', 'data-testid': 'children' }, [node(run.tree)])
  ])
}

/** @param {RunView['receipts'][number]} receipt */
const receiptTable = (receipt) =>
  h('table', { 'data-testid': 'receipt' }, [
    h('thead', {}, [
      h(
        'tr',
        {},
        ['#', 'provider', 'reason', 'outcome', 'error', 'latency', 'tokens'].map((t) => h('th', { text: t }))
      )
    ]),
    h(
      'tbody',
      {},
      receipt.attempts.map((a, i) =>
        h('tr', { class: receipt.winner === i ? 'winner' : '', 'data-testid': 'attempt' }, [
          h('td', { class: 'num', text: i + 1 }),
          h('td', { text: a.provider }),
          h('td', { text: a.reason }),
          h('td', {}, [badge(a.outcome)]),
          h('td', { text: a.errorKind ? a.errorKind + (a.httpStatus ? ` ${a.httpStatus}` : '') + (a.message ? `: ${a.message}` : '') : '' }),
          h('td', { class: 'num', text: a.latencyMs !== undefined ? `${a.latencyMs} ms` : '' }),
          h('td', { class: 'num', text: a.tokensIn !== undefined ? `${a.tokensIn} / ${a.tokensOut}` : '' })
        ])
      )
    )
  ])

/** @param {RunView} run */
export const stepsCard = (run) => {
  const numbers = [...new Set([...run.steps.map((s) => s.step), ...run.receipts.map((r) => r.step)])].sort((a, b) => a - b)
  const body =
    numbers.length === 0
      ? [h('div', { class: 'none', text: 'No model calls yet.' })]
      : numbers.map((n) => {
          const step = run.steps.find((s) => s.step === n)
          const receipt = run.receipts.find((r) => r.step === n)
          return h('div', { class: 'step', 'data-testid': 'step', 'data-step': n }, [
            h('h3', {}, [`Step ${n}`, h('span', { class: 'sub', text: step ? `${step.provider}, ${step.tokens} tokens` : 'no answer' })]),
            step?.text ? h('div', { class: 'said', text: step.text }) : null,
            step?.toolCalls.length
              ? h(
                  'ul',
                  { class: 'calls' },
                  step.toolCalls.map((c, i) => {
                    const origin =
                      c.source && c.source !== 'builtin' ? h('span', { class: 'sub', 'data-testid': 'tool-origin', text: ` ${c.source}, ${c.effect} ` }) : null
                    const result = step.results[i]
                    return h('li', {}, [
                      c.name,
                      origin,
                      ` ${json(c.arguments)}`,
                      result !== undefined ? h('span', { class: 'result', text: `-> ${result}` }) : null
                    ])
                  })
                )
              : null,
            receipt ? receiptTable(receipt) : null
          ])
        })
  return h('div', { class: 'card', 'data-testid': 'receipts' }, [h('h2', { text: 'Steps and receipts' }), ...body])
}

/** @param {RunView} run */
export const policyCard = (run) => {
  const body =
    run.policyEvents.length === 0
      ? h('div', { class: 'none', text: 'No policy events.' })
      : h('table', { 'data-testid': 'policy-events' }, [
          h('thead', {}, [
            h(
              'tr',
              {},
              ['step', 'kind', 'act', 'target', 'decision', 'rule / layer', 'source'].map((t) => h('th', { text: t }))
            )
          ]),
          h(
            'tbody',
            {},
            run.policyEvents.map((e) =>
              h('tr', { 'data-testid': 'policy-event' }, [
                h('td', { class: 'num', text: e.step }),
                h('td', {}, [badge(e.kind)]),
                h('td', { text: e.act }),
                h('td', {}, [h('code', { text: e.target + (e.performedTarget ? ` (performed ${e.performedTarget})` : '') })]),
                h('td', {}, [badge(e.decision)]),
                h('td', { class: 'mono', text: `${e.rule} / ${e.layer}` }),
                h('td', { text: e.source })
              ])
            )
          )
        ])
  return h('div', { class: 'card' }, [h('h2', { text: 'Policy events' }), body])
}
