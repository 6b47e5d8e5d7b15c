/**
 * The page's application code (browser JavaScript, free of backticks and `${`): the runs list,
 * the run view with time travel over the persisted snapshots, approvals, and live updates from
 * `GET /api/events`. Every element a test or a person looks for has a `data-testid`.
 */
export const APP_SCRIPT = String.raw`
var S = { runs: [], status: '', text: '', machine: null, layout: null, runId: null, run: null, missing: null, seq: null, notes: {}, errors: {}, busy: {}, editing: {} };

var FINAL = ['succeeded', 'failed', 'cancelled', 'timed_out', 'step_cap'];
/** Actions act on the run as it is now: off while an earlier seq is shown. */
function pastView() { return S.seq !== null; }

function $(id) { return document.getElementById(id); }
function short(id) { return String(id).slice(0, 8); }
function pad(n, w) { n = String(n); while (n.length < (w || 2)) n = '0' + n; return n; }
function clock(iso, ms) {
  var d = new Date(iso);
  if (isNaN(d.getTime())) return String(iso || '');
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + (ms ? '.' + pad(d.getMilliseconds(), 3) : '');
}
function when(iso) {
  var d = new Date(iso);
  if (isNaN(d.getTime())) return '';
  var today = new Date().toDateString() === d.toDateString();
  return (today ? '' : d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ') + clock(iso);
}
function badge(status, extra) { return h('span', { class: 'badge ' + status + (extra ? ' ' + extra : ''), text: status.replace(/_/g, ' ') }); }
/**
 * What a request's status means for its kind: a question is answered, not approved; an
 * interrupted exec is retried, completed or aborted (the store keeps approved or denied).
 */
var RESOLVED = { answered: 'answered', retry: 'retried', completed: 'completed', abort: 'aborted' };
function requestBadge(a) {
  var label = a.status !== 'pending' && a.resolution && RESOLVED[a.resolution] ? RESOLVED[a.resolution] : a.status;
  return h('span', { class: 'badge ' + a.status, 'data-testid': 'request-status', text: label });
}
function json(value) { return typeof value === 'string' ? value : JSON.stringify(value); }

async function getJson(url, options) {
  var res = await fetch(url, options);
  var body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (res.status === 401) locked(body && body.error);
  return { ok: res.ok, status: res.status, body: body };
}

/**
 * The server no longer knows this page's cookie (it was restarted, and makes a new token each
 * time, or the cookie was cleared): said once at the top, since nothing on the page can work.
 */
function locked(message) {
  var banner = $('locked');
  banner.textContent = message || 'this inspector needs its token: open the URL it printed';
  banner.hidden = false;
  var live = $('live');
  live.dataset.live = 'false'; live.textContent = 'locked';
}

// ---- runs list --------------------------------------------------------------------------

async function loadRuns() {
  var wanted = S.status;
  var r = await getJson('/api/runs' + (wanted ? '?status=' + encodeURIComponent(wanted) : ''));
  if (!r.ok || wanted !== S.status) return;
  S.runs = r.body;
  renderRuns();
}

/**
 * The runs as trees: each root newest first, its children under it in spawn order (the server
 * sends them so), depth-first. A run whose parent is not listed (filtered out) heads its own group.
 */
function grouped(runs) {
  var listed = {}, kids = {}, roots = [], out = [];
  runs.forEach(function (r) { listed[r.id] = true; });
  runs.forEach(function (r) {
    if (r.parentId && listed[r.parentId]) (kids[r.parentId] = kids[r.parentId] || []).push(r);
    else roots.push(r);
  });
  function add(r, depth) {
    out.push({ run: r, depth: depth });
    (kids[r.id] || []).forEach(function (c) { add(c, Math.min(depth + 1, 4)); });
  }
  roots.slice().reverse().forEach(function (r) { add(r, 0); });
  return out;
}

function renderRuns() {
  var text = S.text.trim().toLowerCase();
  var shown = grouped(S.runs).filter(function (item) {
    var run = item.run;
    return !text || run.goal.toLowerCase().indexOf(text) >= 0 || run.id.indexOf(text) === 0;
  });
  var list = $('runs-list');
  list.replaceChildren.apply(list, shown.map(function (item) {
    var run = item.run;
    return h('li', { 'data-testid': 'run-row', 'data-run-id': run.id, 'data-status': run.status, 'data-depth': item.depth, class: (run.id === S.runId ? 'selected' : '') + (item.depth > 0 ? ' child depth-' + item.depth : '') }, [
      h('a', { href: '#/runs/' + encodeURIComponent(run.id) }, [
        badge(run.status), run.interrupted ? [' ', badge('interrupted')] : null,
        h('span', { class: 'goal', text: run.goal }),
        h('span', { class: 'meta', text: short(run.id) + '  ' + run.state + '  ' + when(run.updatedAt) + (run.parentId ? '  child of ' + short(run.parentId) : '') })
      ])
    ]);
  }));
  $('count').textContent = shown.length + (shown.length === 1 ? ' run' : ' runs') + (S.status || text ? ' (filtered)' : '');
  if (shown.length === 0) list.appendChild(h('li', { class: 'empty', text: S.runs.length ? 'no run matches' : 'no runs yet' }));
}

// ---- one run ----------------------------------------------------------------------------

async function loadRun(id) {
  var r = await getJson('/api/runs/' + encodeURIComponent(id));
  if (id !== S.runId) return;
  if (r.status === 404) { S.run = null; S.missing = id; renderDetail(); return; }
  if (!r.ok) return;
  S.run = r.body; S.missing = null;
  if (S.seq !== null && S.seq > S.run.snapshots.length) S.seq = null;
  renderDetail();
  renderRuns();
}

/** The seq being looked at: null follows the latest transition. */
function viewedSeq() { return S.seq === null ? S.run.snapshots.length : S.seq; }

function travel(seq) {
  if (!S.run) return;
  var last = S.run.snapshots.length;
  seq = Math.max(0, Math.min(last, seq));
  S.seq = seq === last ? null : seq;
  renderDetail();
}

function renderDetail() {
  var root = $('detail');
  var keepScroll = root.querySelector('.timeline-scroll');
  var scrollTop = keepScroll ? keepScroll.scrollTop : 0;
  if (S.missing) { root.replaceChildren(h('div', { class: 'empty', 'data-testid': 'run-missing', text: 'No run with id ' + S.missing })); return; }
  if (!S.run) { root.replaceChildren(h('div', { class: 'empty', text: S.runId ? 'Loading...' : 'Select a run on the left.' })); return; }
  var run = S.run, then = asOf(run);
  root.replaceChildren(h('div', { 'data-testid': 'run-view', 'data-run-id': run.run.id, 'data-as-of': S.seq === null ? 'latest' : String(S.seq) }, [
    head(run),
    chartCard(run),
    h('div', { class: 'grid2' }, [timelineCard(run), h('div', {}, [approvalsCard(then), treeCard(then)])]),
    stepsCard(then),
    policyCard(then)
  ]));
  var svg = root.querySelector('svg.chart');
  if (svg) untangleLabels(svg);
  var scroller = root.querySelector('.timeline-scroll');
  if (scroller) {
    if (S.seq === null) scroller.scrollTop = scroller.scrollHeight;
    else scroller.scrollTop = scrollTop;
  }
}

/**
 * The run as it stood after the seq being looked at (time travel): the steps answered by then
 * (a step's results once its tools were done), the attempts sent by then (one not settled yet
 * shows in flight), the requests made by then (pending if decided later), the policy events and
 * the children known by then. At the latest seq, the run as it is.
 */
function asOf(run) {
  if (S.seq === null) return run;
  var seq = S.seq;
  var at = seq === 0 ? '' : run.transitions[seq - 1].at;
  var snap = seq === 0 ? null : run.snapshots[seq - 1];
  var answered = snap && snap.context && typeof snap.context.completedSteps === 'number' ? snap.context.completedSteps : 0;
  var state = snap ? snap.state : 'dispatching';
  var toolsPending = /^(acting|awaitingApproval|awaitingInput|awaitingChildren)/.test(state);
  var by = function (time) { return seq > 0 && time <= at; };
  var keep = function (node) {
    return Object.assign({}, node, { children: node.children.filter(function (c) { return by(c.createdAt); }).map(keep) });
  };
  return Object.assign({}, run, {
    steps: run.steps.filter(function (s) { return s.step <= answered; }).map(function (s) {
      return s.step === answered && toolsPending ? Object.assign({}, s, { results: [] }) : s;
    }),
    receipts: run.receipts.map(function (r) {
      var attempts = r.attempts.filter(function (a) { return by(a.startedAt); }).map(function (a) {
        return a.settledAt !== undefined && by(a.settledAt) ? a : { provider: a.provider, reason: a.reason, outcome: 'in_flight', startedAt: a.startedAt };
      });
      return { step: r.step, attempts: attempts, winner: r.winner !== null && r.winner < attempts.length && attempts[r.winner].outcome === 'ok' ? r.winner : null };
    }).filter(function (r) { return r.attempts.length > 0; }),
    approvals: run.approvals.filter(function (a) { return by(a.createdAt); }).map(function (a) {
      return a.decidedAt !== undefined && by(a.decidedAt) ? a : Object.assign({}, a, { status: 'pending', source: undefined, account: undefined, editedArguments: undefined });
    }),
    policyEvents: run.policyEvents.filter(function (e) { return by(e.at); }),
    tree: run.tree ? Object.assign({}, keep(run.tree), { id: run.tree.id }) : run.tree
  });
}

/** A run's usage as the facts line shows it (docs/task-file.md, "Usage and budgets"). */
function usageText(u) {
  var text = (u.inputTokens + u.outputTokens).toLocaleString('en-US') + ' tokens (' + u.inputTokens.toLocaleString('en-US') + ' in, ' + u.outputTokens.toLocaleString('en-US') + ' out)';
  return u.costUsd === undefined ? text : text + ', $' + u.costUsd;
}

function head(run) {
  var r = run.run;
  return h('div', { class: 'run-head' }, [
    h('h1', { text: r.goal }),
    h('div', { class: 'facts' }, [
      h('span', { 'data-testid': 'run-status', 'data-status': r.status }, [badge(r.status)]),
      run.interrupted ? badge('interrupted') : null,
      h('span', {}, ['state ', h('code', { 'data-testid': 'run-state', text: run.state })]),
      h('span', {}, ['id ', h('code', { text: r.id })]),
      r.parentId ? h('span', {}, ['parent ', h('a', { href: '#/runs/' + encodeURIComponent(r.parentId), class: 'mono', text: short(r.parentId) })]) : null,
      r.forkedFrom ? h('span', { 'data-testid': 'forked-from' }, ['forked from ', h('a', { href: '#/runs/' + encodeURIComponent(r.forkedFrom.runId), class: 'mono', text: short(r.forkedFrom.runId) }), ' at seq ' + r.forkedFrom.seq]) : null,
      run.forks ? h('span', { 'data-testid': 'forks' }, ['forks '].concat(run.forks.map(function (f, i) {
        return [i > 0 ? ', ' : '', h('a', { href: '#/runs/' + encodeURIComponent(f.runId), class: 'mono', 'data-testid': 'fork-link', text: short(f.runId) }), ' (seq ' + f.seq + ')'];
      }))) : null,
      h('span', { text: 'created ' + when(r.createdAt) }),
      h('span', { text: 'updated ' + when(r.updatedAt) }),
      r.usage ? h('span', { 'data-testid': 'run-usage', text: usageText(r.usage) + (r.treeUsage ? '; tree ' + usageText(r.treeUsage) : '') }) : null
    ]),
    runActions(run),
    r.error ? h('div', { class: 'error-box', 'data-testid': 'run-error', text: r.error.kind + ': ' + r.error.message }) : null,
    run.output !== undefined ? h('div', { class: 'output-box', 'data-testid': 'run-output' }, [h('strong', { text: 'output ' }), h('code', { text: json(run.output) })]) : null,
    run.turns && run.turns.length > 1 ? h('div', { class: 'facts', 'data-testid': 'run-turns' }, run.turns.slice(1).map(function (t) {
      return h('span', { text: 'turn ' + t.turn + ' from step ' + t.firstStep + (t.message ? ': ' + t.message.slice(0, 120) : '') });
    })) : null
  ]);
}

/** Resume and Cancel, through the same use cases as agentvisor resume and cancel. */
function runActions(run) {
  var r = run.run, ended = FINAL.indexOf(r.status) >= 0, busy = S.busy['run:' + r.id] === true;
  var open = run.approvals.some(function (a) { return a.status === 'pending'; });
  var resumable = !ended && !open && (run.interrupted || r.status === 'awaiting_approval' || r.status === 'awaiting_input');
  var past = pastView();
  return h('div', { class: 'actions run-actions', 'data-testid': 'run-actions' }, [
    h('button', { 'data-testid': 'run-resume', disabled: busy || past || !resumable, title: resumable ? 'drive the run on in the inspector, as agentvisor resume does' : 'nothing to resume', onclick: function () { runAction(r.id, 'resume'); }, text: 'Resume' }),
    h('button', { class: 'deny', 'data-testid': 'run-cancel', disabled: busy || past || ended, title: 'cancel the run, as agentvisor cancel does', onclick: function () { runAction(r.id, 'cancel'); }, text: 'Cancel' }),
    past ? h('span', { class: 'none', 'data-testid': 'actions-off', text: 'actions are off while an earlier seq is shown' }) : null,
    S.errors['run:' + r.id] ? h('span', { class: 'approval-error', 'data-testid': 'run-action-error', text: S.errors['run:' + r.id] }) : null
  ]);
}

async function runAction(runId, action) {
  var key = 'run:' + runId;
  S.busy[key] = true; delete S.errors[key]; renderDetail();
  var r = await getJson('/api/runs/' + encodeURIComponent(runId) + '/' + action, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  delete S.busy[key];
  if (!r.ok) S.errors[key] = (r.body && r.body.error) || ('HTTP ' + r.status);
  if (S.runId === runId) await loadRun(runId);
}

/** Fork from the seq shown: a new run from the state then (agentvisor fork RUN --at SEQ). */
function forkButton(run, seq, state) {
  var forkable = seq > 0 && !/^(finished|awaitingChildren)/.test(state);
  var busy = S.busy['fork:' + run.run.id] === true;
  return h('button', {
    'data-testid': 'fork-here', disabled: busy || !forkable,
    title: forkable ? 'a new run from the state shown, driven by the inspector (the workspace is not rewound)' : 'a run that had ended or waited for its children then cannot be forked there',
    onclick: function () { forkAt(run.run.id, seq); }, text: 'Fork from here'
  });
}

async function forkAt(runId, seq) {
  var key = 'fork:' + runId;
  S.busy[key] = true; delete S.errors[key]; renderDetail();
  var r = await getJson('/api/runs/' + encodeURIComponent(runId) + '/fork', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ seq: seq }) });
  delete S.busy[key];
  if (!r.ok) { S.errors[key] = (r.body && r.body.error) || ('HTTP ' + r.status); renderDetail(); return; }
  location.hash = '#/runs/' + encodeURIComponent(r.body.runId);
}

function chartCard(run) {
  var n = run.snapshots.length, seq = viewedSeq();
  var lit = seq === 0 ? (S.machine ? S.machine.initial : 'dispatching') : run.snapshots[seq - 1].state;
  var visited = {};
  if (S.machine) visited[S.layout.initial] = true;
  run.snapshots.slice(0, seq).forEach(function (s) { visited[s.state] = true; });
  var t = seq > 0 ? run.transitions[seq - 1] : null;
  var chart = S.layout ? drawChart(S.layout, lit, visited, t ? { from: t.from, to: t.to } : null) : h('div', { class: 'none', text: 'loading the machine...' });
  var viewing = seq === 0 ? 'start' : 'seq ' + seq;
  return h('div', { class: 'card' }, [
    h('div', { class: 'card-head' }, [
      h('h2', { text: 'State chart' }),
      h('div', { class: 'travel' }, [
        h('button', { 'data-testid': 'step-first', title: 'first state', disabled: seq === 0, onclick: function () { travel(0); }, text: '|<' }),
        h('button', { 'data-testid': 'step-back', title: 'one transition back (left arrow)', disabled: seq === 0, onclick: function () { travel(viewedSeq() - 1); }, text: '< back' }),
        h('span', { class: 'viewing', 'data-testid': 'viewing-seq', 'data-seq': seq, 'data-latest': S.seq === null ? 'true' : 'false' }, [
          h('b', { text: viewing }), ' of ' + n + (S.seq === null ? ' (live)' : '')
        ]),
        h('button', { 'data-testid': 'step-forward', title: 'one transition forward (right arrow)', disabled: seq >= n, onclick: function () { travel(viewedSeq() + 1); }, text: 'forward >' }),
        h('button', { 'data-testid': 'step-latest', title: 'follow the latest state', disabled: S.seq === null, onclick: function () { travel(n); }, text: 'latest >|' }),
        forkButton(run, seq, lit)
      ])
    ]),
    S.errors['fork:' + run.run.id] ? h('div', { class: 'approval-error', 'data-testid': 'fork-error', text: S.errors['fork:' + run.run.id] }) : null,
    h('div', { class: 'chart-wrap' }, [chart]),
    anyStateNote(),
    contextChips(run, seq)
  ]);
}

function anyStateNote() {
  if (!S.layout || S.layout.anyState.length === 0) return null;
  return h('div', { class: 'any-state' }, ['From any state not finished: '].concat(S.layout.anyState.map(function (e, i) {
    return [i ? ', ' : '', h('code', { text: e.event }), ' to ', h('code', { text: e.to })];
  })));
}

function contextChips(run, seq) {
  var snap = seq > 0 ? run.snapshots[seq - 1] : null;
  if (!snap || !snap.context || typeof snap.context !== 'object') return null;
  var prev = seq > 1 && run.snapshots[seq - 2].context ? run.snapshots[seq - 2].context : {};
  return h('div', { class: 'context', 'data-testid': 'snapshot-context', title: 'the machine context persisted with this transition (changed fields highlighted)' }, Object.keys(snap.context).map(function (k) {
    var v = snap.context[k], changed = seq > 1 && json(prev[k]) !== json(v);
    return h('span', { class: changed ? 'changed' : '', text: k + ' ' + (v && typeof v === 'object' ? json(v.kind || v) : json(v)) });
  }));
}

function timelineCard(run) {
  var seq = viewedSeq();
  var row = function (s, event, from, to, at) {
    return h('tr', { class: 'timeline-row' + (s === seq ? ' viewing' : '') + (s > seq ? ' future' : ''), 'data-testid': 'timeline-row', 'data-seq': s, onclick: function () { travel(s); } }, [
      h('td', { class: 'num', text: s }), h('td', {}, [h('code', { text: event })]), h('td', { text: from }), h('td', { text: to }), h('td', { class: 'time', text: clock(at, true) })
    ]);
  };
  var rows = [row(0, 'start', '', S.machine ? S.machine.initial : '', run.run.createdAt)].concat(run.transitions.map(function (t) { return row(t.seq, t.event, t.from, t.to, t.at); }));
  return h('div', { class: 'card' }, [
    h('h2', { text: 'Timeline' }),
    h('div', { class: 'scroll timeline-scroll' }, [
      h('table', { 'data-testid': 'timeline' }, [
        h('thead', {}, [h('tr', {}, [h('th', { text: 'seq' }), h('th', { text: 'event' }), h('th', { text: 'from' }), h('th', { text: 'to' }), h('th', { text: 'at' })])]),
        h('tbody', {}, rows)
      ])
    ])
  ]);
}

async function decide(runId, requestId, decision, edit) {
  S.busy[requestId] = true; delete S.errors[requestId]; renderDetail();
  var r = await getJson('/api/runs/' + encodeURIComponent(runId) + '/approvals/' + encodeURIComponent(requestId), {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(edit === undefined ? { decision: decision } : { decision: decision, edit: edit })
  });
  if (r.ok) delete S.editing[requestId];
  delete S.busy[requestId];
  if (!r.ok) S.errors[requestId] = (r.body && r.body.error) || ('HTTP ' + r.status);
  else if (r.body && r.body.note) S.notes[requestId] = r.body.note;
  if (S.runId === runId) await loadRun(runId);
}

async function answerQuestion(runId, requestId, text) {
  S.busy[requestId] = true; delete S.errors[requestId]; renderDetail();
  var r = await getJson('/api/runs/' + encodeURIComponent(runId) + '/answers/' + encodeURIComponent(requestId), {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: text })
  });
  delete S.busy[requestId];
  if (!r.ok) S.errors[requestId] = (r.body && r.body.error) || ('HTTP ' + r.status);
  else if (r.body && r.body.note) S.notes[requestId] = r.body.note;
  if (S.runId === runId) await loadRun(runId);
}

/** A question the model asked (ask_human): a field for the answer while it waits, the answer once given. */
function questionActions(run, a, busy) {
  if (a.status !== 'pending') return h('span', { class: 'none', text: a.source ? 'answered by ' + a.source : '' });
  var field = h('input', { type: 'text', 'data-testid': 'answer-text', placeholder: 'your answer', disabled: busy || pastView() });
  return h('div', { class: 'actions' }, [field,
    h('button', { class: 'approve', 'data-testid': 'answer', disabled: busy || pastView(), onclick: function () { if (field.value.trim() !== '') answerQuestion(run.run.id, a.id, field.value); }, text: 'Answer' })]);
}

/** Approve, Deny, and Edit: the call's arguments as JSON, changed and approved (checked against the policy again). */
function approvalActions(run, a, disabled) {
  var editing = S.editing[a.id];
  var buttons = [
    h('button', { class: 'approve', 'data-testid': 'approve', disabled: disabled, onclick: function () { decide(run.run.id, a.id, 'approve'); }, text: 'Approve' }),
    h('button', { class: 'deny', 'data-testid': 'deny', disabled: disabled, onclick: function () { decide(run.run.id, a.id, 'deny'); }, text: 'Deny' })
  ];
  if (a.arguments !== undefined && typeof a.arguments === 'object') {
    buttons.push(h('button', { 'data-testid': 'edit', disabled: disabled, onclick: function () { S.editing[a.id] = editing === undefined ? JSON.stringify(a.arguments, null, 2) : undefined; if (S.editing[a.id] === undefined) delete S.editing[a.id]; renderDetail(); }, text: editing === undefined ? 'Edit' : 'Cancel edit' }));
  }
  return h('div', { class: 'actions' }, buttons);
}

/** The row under a request being edited: its arguments as JSON, the full width of the card. */
function editRow(run, a, disabled) {
  var area = h('textarea', { 'data-testid': 'edit-arguments', rows: 5, disabled: disabled, oninput: function (e) { S.editing[a.id] = e.target.value; } });
  area.value = S.editing[a.id];
  return h('tr', { class: 'edit-row', 'data-testid': 'edit-row', 'data-request-id': a.id }, [h('td', { colspan: 4 }, [area,
    h('button', { class: 'approve', 'data-testid': 'approve-edited', disabled: disabled, onclick: function () {
      var edit;
      try { edit = JSON.parse(S.editing[a.id]); } catch (e) { S.errors[a.id] = 'the arguments are not valid JSON'; renderDetail(); return; }
      decide(run.run.id, a.id, 'approve', edit);
    }, text: 'Approve with these arguments' })])]);
}

function approvalsCard(run) {
  var body = run.approvals.length === 0 ? h('div', { class: 'none', text: 'No approval requests.' }) : h('table', { 'data-testid': 'approvals' }, [
    h('thead', {}, [h('tr', {}, [h('th', { text: 'step' }), h('th', { text: 'request' }), h('th', { text: 'status' }), h('th', {})])]),
    h('tbody', {}, run.approvals.map(function (a) {
      var pending = a.status === 'pending', busy = S.busy[a.id] === true;
      var actions = a.kind === 'input' ? questionActions(run, a, busy)
        : !pending ? h('span', { class: 'none', text: a.source ? 'by ' + a.source : '' })
        : a.kind === 'recovery' ? h('span', { class: 'none', text: 'an interrupted exec: settle it with agentvisor approve --retry, --completed or --abort' })
        : approvalActions(run, a, busy || pastView());
      var editing = pending && S.editing[a.id] !== undefined ? editRow(run, a, busy || pastView()) : null;
      return [h('tr', { 'data-testid': 'approval-row', 'data-request-id': a.id, 'data-status': a.status }, [
        h('td', { class: 'num', text: a.step }),
        h('td', { class: 'request' }, [h('code', { text: a.kind === 'input' ? 'asks: ' + a.target : a.act + ' ' + a.target }),
          a.kind === 'input' ? (a.account ? h('div', { class: 'approval-note', text: 'answer: ' + a.account }) : null)
            : h('div', { class: 'approval-note', text: 'rule ' + a.rule + ' in layer ' + a.layer + (a.remember ? ', remembered' : '') }),
          pending && a.arguments !== undefined && S.editing[a.id] === undefined ? h('code', { class: 'request-args', 'data-testid': 'approval-arguments', text: json(a.arguments) }) : null,
          a.editedArguments !== undefined ? h('div', { class: 'approval-note', text: 'edited: ' + json(a.editedArguments) }) : null,
          S.errors[a.id] ? h('div', { class: 'approval-error', 'data-testid': 'approval-error', text: S.errors[a.id] }) : null,
          S.notes[a.id] ? h('div', { class: 'approval-note', text: S.notes[a.id] }) : null]),
        h('td', {}, [requestBadge(a)]),
        h('td', {}, [actions])
      ]), editing];
    }))
  ]);
  return h('div', { class: 'card' }, [h('h2', { text: 'Approvals' }), body]);
}

function treeCard(run) {
  var node = function (n) {
    return h('li', { class: n.id === run.run.id ? 'here' : '', 'data-testid': 'tree-node', 'data-run-id': n.id }, [
      h('div', {}, [
        h('a', { href: '#/runs/' + encodeURIComponent(n.id), class: 'mono', 'data-testid': 'child-link', text: short(n.id) }),
        badge(n.status), h('span', { class: 'goal', text: n.goal })
      ]),
      n.children.length ? h('ul', {}, n.children.map(node)) : null
    ]);
  };
  var alone = run.tree.children.length === 0;
  return h('div', { class: 'card' }, [
    h('h2', { text: 'Run tree' }),
    alone ? h('div', { class: 'none', text: 'No child runs.' }) : h('ul', { class: 'tree', 'data-testid': 'children' }, [node(run.tree)])
  ]);
}

function stepsCard(run) {
  var numbers = [];
  run.steps.forEach(function (s) { if (numbers.indexOf(s.step) < 0) numbers.push(s.step); });
  run.receipts.forEach(function (r) { if (numbers.indexOf(r.step) < 0) numbers.push(r.step); });
  numbers.sort(function (a, b) { return a - b; });
  var body = numbers.length === 0 ? [h('div', { class: 'none', text: 'No model calls yet.' })] : numbers.map(function (n) {
    var step = run.steps.filter(function (s) { return s.step === n; })[0];
    var receipt = run.receipts.filter(function (r) { return r.step === n; })[0];
    return h('div', { class: 'step', 'data-testid': 'step', 'data-step': n }, [
      h('h3', {}, ['Step ' + n, h('span', { class: 'sub', text: step ? step.provider + ', ' + step.tokens + ' tokens' : 'no answer' })]),
      step && step.text ? h('div', { class: 'said', text: step.text }) : null,
      step && step.toolCalls.length ? h('ul', { class: 'calls' }, step.toolCalls.map(function (c, i) {
        var origin = c.source && c.source !== 'builtin' ? h('span', { class: 'sub', 'data-testid': 'tool-origin', text: ' ' + c.source + ', ' + c.effect + ' ' }) : null;
        return h('li', {}, [c.name, origin, ' ' + json(c.arguments), step.results[i] !== undefined ? h('span', { class: 'result', text: '-> ' + step.results[i] }) : null]);
      })) : null,
      receipt ? h('table', { 'data-testid': 'receipt' }, [
        h('thead', {}, [h('tr', {}, ['#', 'provider', 'reason', 'outcome', 'error', 'latency', 'tokens'].map(function (t) { return h('th', { text: t }); }))]),
        h('tbody', {}, receipt.attempts.map(function (a, i) {
          return h('tr', { class: receipt.winner === i ? 'winner' : '', 'data-testid': 'attempt' }, [
            h('td', { class: 'num', text: i + 1 }), h('td', { text: a.provider }), h('td', { text: a.reason }),
            h('td', {}, [badge(a.outcome)]),
            h('td', { text: a.errorKind ? a.errorKind + (a.httpStatus ? ' ' + a.httpStatus : '') + (a.message ? ': ' + a.message : '') : '' }),
            h('td', { class: 'num', text: a.latencyMs !== undefined ? a.latencyMs + ' ms' : '' }),
            h('td', { class: 'num', text: a.tokensIn !== undefined ? a.tokensIn + ' / ' + a.tokensOut : '' })
          ]);
        }))
      ]) : null
    ]);
  });
  return h('div', { class: 'card', 'data-testid': 'receipts' }, [h('h2', { text: 'Steps and receipts' })].concat(body));
}

function policyCard(run) {
  var body = run.policyEvents.length === 0 ? h('div', { class: 'none', text: 'No policy events.' }) : h('table', { 'data-testid': 'policy-events' }, [
    h('thead', {}, [h('tr', {}, ['step', 'kind', 'act', 'target', 'decision', 'rule / layer', 'source'].map(function (t) { return h('th', { text: t }); }))]),
    h('tbody', {}, run.policyEvents.map(function (e) {
      return h('tr', { 'data-testid': 'policy-event' }, [
        h('td', { class: 'num', text: e.step }), h('td', {}, [badge(e.kind)]), h('td', { text: e.act }),
        h('td', {}, [h('code', { text: e.target + (e.performedTarget ? ' (performed ' + e.performedTarget + ')' : '') })]),
        h('td', {}, [badge(e.decision)]), h('td', { class: 'mono', text: e.rule + ' / ' + e.layer }), h('td', { text: e.source })
      ]);
    }))
  ]);
  return h('div', { class: 'card' }, [h('h2', { text: 'Policy events' }), body]);
}

// ---- routing, live updates --------------------------------------------------------------

function route() {
  var m = /^#\/runs\/([^/]+)/.exec(location.hash);
  var id = m ? decodeURIComponent(m[1]) : null;
  if (id !== S.runId) { S.runId = id; S.run = null; S.missing = null; S.seq = null; S.notes = {}; S.errors = {}; }
  renderDetail();
  renderRuns();
  if (id) loadRun(id);
}

var pending = null, pendingIds = {};
function changed(runIds) {
  runIds.forEach(function (id) { pendingIds[id] = true; });
  if (pending) return;
  pending = setTimeout(function () {
    var ids = pendingIds; pending = null; pendingIds = {};
    loadRuns();
    if (!S.runId) return;
    var family = S.run ? [] : [S.runId];
    (function walk(n) { if (n) { family.push(n.id); n.children.forEach(walk); } })(S.run && S.run.tree);
    if (family.some(function (id) { return ids[id]; })) loadRun(S.runId);
  }, 60);
}

function connect() {
  var live = $('live');
  var events = new EventSource('/api/events');
  events.onopen = function () {
    live.dataset.live = 'true'; live.textContent = 'live';
    loadRuns();
    if (S.runId) loadRun(S.runId);
  };
  events.onerror = function () {
    live.dataset.live = 'false'; live.textContent = 'reconnecting...';
    // Refused (a 401 closes the stream for good): ask the API why, which shows the banner.
    if (events.readyState === EventSource.CLOSED) getJson('/api/info');
  };
  events.onmessage = function (m) {
    var msg;
    try { msg = JSON.parse(m.data); } catch (e) { return; }
    if (msg && msg.type === 'changed' && Array.isArray(msg.runIds)) changed(msg.runIds);
  };
}

async function start() {
  // The token was for the first load only (it set the cookie): off the address bar and the history.
  if (/[?&]token=/.test(location.search)) history.replaceState(null, '', location.pathname + location.hash);
  var select = $('status-filter');
  STATUSES.forEach(function (s) { select.appendChild(h('option', { value: s, text: s.replace(/_/g, ' ') })); });
  select.addEventListener('change', function () { S.status = select.value; loadRuns(); });
  $('search').addEventListener('input', function (e) { S.text = e.target.value; renderRuns(); });
  document.addEventListener('keydown', function (e) {
    if (!S.run || /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement && document.activeElement.tagName)) return;
    if (e.key === 'ArrowLeft') { travel(viewedSeq() - 1); e.preventDefault(); }
    if (e.key === 'ArrowRight') { travel(viewedSeq() + 1); e.preventDefault(); }
  });
  window.addEventListener('hashchange', route);
  var info = await getJson('/api/info');
  if (info.ok) $('db').textContent = info.body.db;
  var machine = await getJson('/api/machine');
  if (machine.ok) { S.machine = machine.body; S.layout = layoutMachine(machine.body); }
  route();
  await loadRuns();
  connect();
}

start();
`
