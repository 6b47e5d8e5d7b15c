/** The inspector page's stylesheet (inline: the page loads nothing else). */
export const PAGE_STYLE = `
:root {
  --bg: #f6f7f9; --card: #fff; --ink: #1d2330; --muted: #667085; --line: #e3e6eb; --accent: #2f6fed;
  --ok: #127a43; --ok-bg: #e3f5ea; --warn: #9a5b00; --warn-bg: #fff1d6; --bad: #b42318; --bad-bg: #fde7e5;
  --run: #1f5fd1; --run-bg: #e5eeff; --idle: #5b6474; --idle-bg: #eceef2; --cap: #6941c6; --cap-bg: #efe9fc;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, .mono { font-family: var(--mono); font-size: 12.5px; }
button { font: inherit; font-size: 13px; border: 1px solid var(--line); background: #fff; color: var(--ink); border-radius: 6px; padding: 3px 10px; cursor: pointer; }
button:hover:not(:disabled) { border-color: #c5cad3; background: #f3f5f8; }
button:disabled { opacity: .45; cursor: default; }
button.approve { background: var(--ok); border-color: var(--ok); color: #fff; }
button.approve:hover:not(:disabled) { background: #0e6437; }
button.deny { color: var(--bad); border-color: #f1b8b3; }
select, input { font: inherit; font-size: 13px; border: 1px solid var(--line); border-radius: 6px; padding: 4px 8px; background: #fff; color: var(--ink); }

header.top { display: flex; align-items: center; gap: 16px; height: 46px; padding: 0 18px; background: #161b26; color: #e8ebf1; }
header.top .brand { font-weight: 600; letter-spacing: .2px; }
header.top .brand span { color: #8fb1ff; font-weight: 500; }
header.top .db { color: #98a2b3; font-family: var(--mono); font-size: 12px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 1; }
.live { font-size: 12px; color: #98a2b3; }
.live::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; background: #98a2b3; margin-right: 6px; vertical-align: 0; }
.live[data-live="true"] { color: #b7f0cd; }
.live[data-live="true"]::before { background: #36c275; }

.locked { padding: 8px 18px; background: var(--bad-bg); color: var(--bad); font-size: 13px; }
.locked[hidden] { display: none; }
.layout { display: grid; grid-template-columns: 330px 1fr; height: calc(100% - 46px); }
aside.runs { border-right: 1px solid var(--line); background: #fff; display: flex; flex-direction: column; min-height: 0; }
.filters { display: flex; gap: 8px; padding: 12px; border-bottom: 1px solid var(--line); }
.filters select { flex: 0 0 auto; }
.filters input { flex: 1; min-width: 0; }
.count { padding: 6px 14px; font-size: 12px; color: var(--muted); border-bottom: 1px solid var(--line); }
ul.run-list { list-style: none; margin: 0; padding: 0; overflow-y: auto; flex: 1; }
ul.run-list li a { display: block; padding: 9px 14px; border-bottom: 1px solid #f0f1f4; color: var(--ink); text-decoration: none; }
ul.run-list li a:hover { background: #f7f9fc; }
ul.run-list li.selected a { background: #edf3ff; box-shadow: inset 3px 0 0 var(--accent); }
ul.run-list .goal { display: block; margin-top: 3px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
ul.run-list .meta { display: block; font-size: 11.5px; color: var(--muted); font-family: var(--mono); margin-top: 1px; }
ul.run-list li.child a { padding-left: 26px; box-shadow: inset 2px 0 0 #e3e7ee; }
ul.run-list li.depth-2 a { padding-left: 38px; }
ul.run-list li.depth-3 a { padding-left: 50px; }
ul.run-list li.depth-4 a { padding-left: 62px; }
.empty { color: var(--muted); padding: 40px; text-align: center; }

main.detail { overflow-y: auto; padding: 18px 22px 40px; min-width: 0; }
.run-head h1 { font-size: 19px; margin: 0 0 6px; font-weight: 600; }
.facts { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; color: var(--muted); font-size: 12.5px; }
.facts code { color: var(--ink); }
.output-box { margin-top: 10px; padding: 8px 12px; border-radius: 6px; background: var(--ok-bg); font-size: 13px; overflow-wrap: anywhere; }
.error-box { margin-top: 10px; padding: 8px 12px; border-radius: 6px; background: var(--bad-bg); color: var(--bad); font-size: 13px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; margin-top: 16px; }
.card h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .6px; color: var(--muted); margin: 0 0 10px; font-weight: 600; }
.card-head { display: flex; align-items: center; justify-content: space-between; gap: 12px; flex-wrap: wrap; margin-bottom: 6px; }
.card-head h2 { margin: 0; }
.grid2 { display: grid; grid-template-columns: minmax(0, 1.5fr) minmax(0, 1fr); gap: 0 16px; }
@media (max-width: 1250px) { .grid2 { grid-template-columns: minmax(0, 1fr); } }
/* From 800 px wide: a narrower run list, tables and long values that wrap or scroll in their card, the chart scrolling in its own. */
@media (max-width: 1000px) {
  .layout { grid-template-columns: 220px minmax(0, 1fr); }
  main.detail { padding: 12px 12px 32px; }
  .filters { flex-wrap: wrap; }
  .filters select, .filters input { flex: 1 1 100%; }
  .card { overflow-x: auto; }
}
.run-actions { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
td code, .said, .calls li { overflow-wrap: anywhere; }
textarea[data-testid=edit-arguments] { display: block; width: 100%; box-sizing: border-box; margin: 0 0 6px; font-family: var(--mono); font-size: 12px; }

.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 11.5px; font-weight: 600; background: var(--idle-bg); color: var(--idle); white-space: nowrap; }
.badge.running { background: var(--run-bg); color: var(--run); }
.badge.awaiting_approval, .badge.pending { background: var(--warn-bg); color: var(--warn); }
.badge.succeeded, .badge.approved, .badge.ok { background: var(--ok-bg); color: var(--ok); }
.badge.failed, .badge.denied, .badge.refusal, .badge.timed_out { background: var(--bad-bg); color: var(--bad); }
.badge.step_cap { background: var(--cap-bg); color: var(--cap); }
.badge.interrupted { background: var(--warn-bg); color: var(--warn); }

.travel { display: flex; align-items: center; gap: 6px; }
.travel .viewing { font-size: 12.5px; color: var(--muted); min-width: 150px; text-align: center; }
.travel .viewing b { color: var(--ink); }
.chart-wrap { overflow-x: auto; }
svg.chart { display: block; width: 100%; height: auto; min-width: 760px; }
svg.chart .state-node rect { fill: #fff; stroke: #c3c9d4; stroke-width: 1.2; }
svg.chart .state-node text { font-size: 12.5px; fill: var(--ink); text-anchor: middle; dominant-baseline: central; }
svg.chart .state-node.final rect { stroke-width: 2.4; stroke: #c3c9d4; }
svg.chart .state-node.visited rect { fill: #f1f5ff; stroke: #9db5ee; }
svg.chart .state-node.current rect { fill: var(--accent); stroke: #1d4fc0; }
svg.chart .state-node.current text { fill: #fff; font-weight: 600; }
svg.chart .state-node.initial rect { stroke-dasharray: none; }
svg.chart .state-group rect { fill: #fafbfc; stroke: #d6dae1; stroke-dasharray: 4 3; }
svg.chart .state-group.active rect { stroke: #9db5ee; fill: #f6f9ff; }
svg.chart .state-group text { font-size: 11.5px; fill: var(--muted); font-weight: 600; letter-spacing: .4px; }
svg.chart .edge path { fill: none; stroke: #b3bac6; stroke-width: 1.2; }
svg.chart .edge text { font-size: 9.5px; fill: #7a8496; font-family: var(--mono); paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }
svg.chart .edge.taken path { stroke: var(--accent); stroke-width: 2.4; }
svg.chart .edge.taken text { fill: var(--accent); font-weight: 700; }
svg.chart .start-dot { fill: #1d2330; }
.any-state { font-size: 12px; color: var(--muted); margin-top: 6px; }
.any-state code { font-size: 11.5px; }
.context { display: flex; flex-wrap: wrap; gap: 5px; margin-top: 10px; }
.context span { font-family: var(--mono); font-size: 11.5px; background: #f3f5f8; border-radius: 5px; padding: 1px 7px; color: #475467; }
.context span.changed { background: #fff1d6; color: #7a4a00; }

table { width: 100%; border-collapse: collapse; font-size: 13px; }
th { text-align: left; font-weight: 600; color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: .4px; padding: 5px 8px; border-bottom: 1px solid var(--line); }
td { padding: 5px 8px; border-bottom: 1px solid #f0f1f4; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; color: var(--muted); width: 1%; white-space: nowrap; }
.scroll { max-height: 340px; overflow: auto; }
td code { font-size: 12px; }
tr.timeline-row { cursor: pointer; }
tr.timeline-row:hover td { background: #f7f9fc; }
tr.timeline-row.viewing td { background: #e8f0ff; }
tr.timeline-row.future td { color: #a7afbd; }
td.time { color: var(--muted); font-size: 12px; white-space: nowrap; }
.none { color: var(--muted); font-size: 13px; }
.actions { display: flex; flex-wrap: wrap; gap: 6px; }
.actions input { flex: 1 1 8em; min-width: 0; }
/* The request (its target, arguments, answer) may wrap anywhere; the other columns wrap at
   spaces only: the table never grows past its card. */
table[data-testid=approvals] td.request { overflow-wrap: anywhere; }
.request-args { display: block; margin-top: 4px; max-height: 9em; overflow: auto; white-space: pre-wrap; color: #475467; }
.approval-error { color: var(--bad); font-size: 12px; margin-top: 4px; }
.approval-note { color: var(--muted); font-size: 12px; margin-top: 4px; }

.step { border-top: 1px solid var(--line); padding: 10px 0 4px; }
.step:first-of-type { border-top: 0; padding-top: 0; }
.step h3 { font-size: 13.5px; margin: 0 0 6px; font-weight: 600; }
.step h3 .sub { color: var(--muted); font-weight: 400; margin-left: 6px; }
.step .said { color: #475467; font-size: 13px; margin: 2px 0 6px; white-space: pre-wrap; }
.calls { list-style: none; padding: 0; margin: 4px 0 8px; }
.calls li { font-family: var(--mono); font-size: 12px; padding: 2px 0; overflow-wrap: anywhere; }
.calls .result { color: var(--muted); display: block; padding-left: 14px; }
tr.winner td { background: #f3fbf6; }

ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 18px; }
ul.tree { padding-left: 0; }
ul.tree li { padding: 3px 0; }
ul.tree li > div { display: flex; gap: 8px; align-items: baseline; }
ul.tree ul { border-left: 1px dashed #d0d5dd; margin-left: 6px; }
ul.tree .here > div > a { font-weight: 700; color: var(--ink); }
ul.tree .goal { color: var(--muted); font-size: 12.5px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
`
