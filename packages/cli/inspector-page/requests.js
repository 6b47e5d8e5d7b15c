// @ts-check
/** The approvals card: approval requests with Approve, Deny and Edit, questions with their answer field. */

import { answerRequest, decideRequest, errorOf } from './api.js'
import { h } from './dom.js'
import { json, requestBadge } from './format.js'
import { page, pastView, S } from './state.js'

/** @import { Reply } from './api.js' */
/** @import { ApprovalView, RunView } from '../src/inspector/run-view.js' */

/**
 * Marks the request busy while `send` runs, then keeps what the server said of it and fetches
 * the run again.
 * @param {string} runId
 * @param {string} requestId
 * @param {() => Promise<Reply<{ readonly note?: string }>>} send
 */
const settle = async (runId, requestId, send) => {
  S.busy[requestId] = true
  delete S.errors[requestId]
  page.renderDetail()
  const reply = await send()
  delete S.busy[requestId]
  if (!reply.ok) S.errors[requestId] = errorOf(reply) ?? ''
  else if (reply.body?.note) S.notes[requestId] = reply.body.note
  if (S.runId === runId) await page.loadRun(runId)
}

/**
 * @param {string} runId
 * @param {string} requestId
 * @param {'approve' | 'deny'} decision
 * @param {unknown} [edit]
 */
const decide = (runId, requestId, decision, edit) =>
  settle(runId, requestId, async () => {
    const reply = await decideRequest(runId, requestId, decision, edit)
    if (reply.ok) delete S.editing[requestId]
    return reply
  })

/** A question the model asked (ask_human): a field for the answer while it waits, the answer once given. @param {RunView} run @param {ApprovalView} a @param {boolean} busy */
const questionActions = (run, a, busy) => {
  if (a.status !== 'pending') return h('span', { class: 'none', text: a.source ? `answered by ${a.source}` : '' })
  const field = h('input', { type: 'text', 'data-testid': 'answer-text', placeholder: 'your answer', disabled: busy || pastView() })
  const answer = () => {
    if (field.value.trim() !== '') void settle(run.run.id, a.id, () => answerRequest(run.run.id, a.id, field.value))
  }
  return h('div', { class: 'actions' }, [
    field,
    h('button', { class: 'approve', 'data-testid': 'answer', disabled: busy || pastView(), onclick: answer, text: 'Answer' })
  ])
}

/** Approve, Deny, and Edit: the call's arguments as JSON, changed and approved (checked against the policy again). @param {RunView} run @param {ApprovalView} a @param {boolean} disabled */
const approvalActions = (run, a, disabled) => {
  const editing = S.editing[a.id]
  const buttons = [
    h('button', { class: 'approve', 'data-testid': 'approve', disabled, onclick: () => void decide(run.run.id, a.id, 'approve'), text: 'Approve' }),
    h('button', { class: 'deny', 'data-testid': 'deny', disabled, onclick: () => void decide(run.run.id, a.id, 'deny'), text: 'Deny' })
  ]
  if (a.arguments !== undefined && typeof a.arguments === 'object') {
    const toggle = () => {
      if (editing === undefined) S.editing[a.id] = JSON.stringify(a.arguments, null, 2)
      else delete S.editing[a.id]
      page.renderDetail()
    }
    buttons.push(h('button', { 'data-testid': 'edit', disabled, onclick: toggle, text: editing === undefined ? 'Edit' : 'Cancel edit' }))
  }
  return h('div', { class: 'actions' }, buttons)
}

/** The row under a request being edited: its arguments as JSON, the full width of the card. @param {RunView} run @param {ApprovalView} a @param {boolean} disabled */
const editRow = (run, a, disabled) => {
  const area = h('textarea', { 'data-testid': 'edit-arguments', rows: 5, disabled, oninput: () => (S.editing[a.id] = area.value) })
  area.value = S.editing[a.id] ?? ''
  const approveEdited = () => {
    let edit
    try {
      edit = JSON.parse(S.editing[a.id] ?? '')
    } catch {
      S.errors[a.id] = 'the arguments are not valid JSON'
      page.renderDetail()
      return
    }
    void decide(run.run.id, a.id, 'approve', edit)
  }
  return h('tr', { class: 'edit-row', 'data-testid': 'edit-row', 'data-request-id': a.id }, [
    h('td', { colspan: 4 }, [
      area,
      h('button', { class: 'approve', 'data-testid': 'approve-edited', disabled, onclick: approveEdited, text: 'Approve with these arguments' })
    ])
  ])
}

/** @param {RunView} run @param {ApprovalView} a */
const requestRows = (run, a) => {
  const pending = a.status === 'pending'
  const busy = S.busy[a.id] === true
  const actions =
    a.kind === 'input'
      ? questionActions(run, a, busy)
      : !pending
        ? h('span', { class: 'none', text: a.source ? `by ${a.source}` : '' })
        : a.kind === 'recovery'
          ? h('span', { class: 'none', text: 'an interrupted exec: settle it with agentvisor approve --retry, --completed or --abort' })
          : approvalActions(run, a, busy || pastView())
  const editing = pending && S.editing[a.id] !== undefined ? editRow(run, a, busy || pastView()) : null
  const note =
    a.kind === 'input'
      ? a.account
        ? h('div', { class: 'approval-note', text: `answer: ${a.account}` })
        : null
      : h('div', { class: 'approval-note', text: `rule ${a.rule} in layer ${a.layer}${a.remember ? ', remembered' : ''}` })
  const error = S.errors[a.id]
  const said = S.notes[a.id]
  return [
    h('tr', { 'data-testid': 'approval-row', 'data-request-id': a.id, 'data-status': a.status }, [
      h('td', { class: 'num', text: a.step }),
      h('td', { class: 'request' }, [
        h('code', { text: a.kind === 'input' ? `asks: ${a.target}` : `${a.act} ${a.target}` }),
        note,
        pending && a.arguments !== undefined && S.editing[a.id] === undefined
          ? h('code', { class: 'request-args', 'data-testid': 'approval-arguments', text: json(a.arguments) })
          : null,
        a.editedArguments !== undefined ? h('div', { class: 'approval-note', text: `edited: ${json(a.editedArguments)}` }) : null,
        error ? h('div', { class: 'approval-error', 'data-testid': 'approval-error', text: error }) : null,
        said ? h('div', { class: 'approval-note', text: said }) : null
      ]),
      h('td', {}, [requestBadge(a)]),
      h('td', {}, [actions])
    ]),
    editing
  ]
}

/** @param {RunView} run */
export const approvalsCard = (run) => {
  const body =
    run.approvals.length === 0
      ? h('div', { class: 'none', text: 'No approval requests.' })
      : h('table', { 'data-testid': 'approvals' }, [
          h('thead', {}, [h('tr', {}, [h('th', { text: 'step' }), h('th', { text: 'request' }), h('th', { text: 'status' }), h('th', {})])]),
          h(
            'tbody',
            {},
            run.approvals.map((a) => requestRows(run, a))
          )
        ])
  return h('div', { class: 'card' }, [h('h2', { text: 'Approvals' }), body])
}
