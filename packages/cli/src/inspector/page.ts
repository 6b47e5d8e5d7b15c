import { createHash } from 'node:crypto'
import { RunStatus } from '@agentvisor/store'
import { APP_SCRIPT } from './page-app.js'
import { CHART_SCRIPT } from './page-chart.js'
import { PAGE_STYLE } from './page-style.js'

/** The page's one inline script: the run statuses for the filter, the chart, the app. */
const SCRIPT = `var STATUSES = ${JSON.stringify(Object.values(RunStatus))};\n${CHART_SCRIPT}\n${APP_SCRIPT}`

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentvisor inspector</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<header class="top">
  <span class="brand">agentvisor <span>inspector</span></span>
  <span class="db" id="db"></span>
  <span class="live" id="live" data-testid="live-status" data-live="false">connecting...</span>
</header>
<div class="locked" id="locked" data-testid="locked" role="alert" hidden></div>
<div class="layout">
  <aside class="runs">
    <div class="filters">
      <select id="status-filter" data-testid="status-filter" aria-label="status"><option value="">all statuses</option></select>
      <input id="search" data-testid="search-filter" type="search" placeholder="goal or id" aria-label="filter by goal or id">
    </div>
    <div class="count" id="count"></div>
    <ul class="run-list" id="runs-list" data-testid="runs-list"></ul>
  </aside>
  <main class="detail" id="detail"></main>
</div>
<script>${SCRIPT}</script>
</body>
</html>
`

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('base64')

/**
 * The whole inspector front end: one HTML document with inline CSS and vanilla JavaScript,
 * nothing fetched from anywhere but the inspector's own API, and no build step. The content
 * security policy allows exactly this page's script and style (by hash) and same-origin fetches.
 */
export const inspectorPage: { readonly html: string; readonly csp: string } = {
  html: HTML,
  csp: [
    "default-src 'none'",
    `script-src 'sha256-${sha256(SCRIPT)}'`,
    `style-src 'sha256-${sha256(PAGE_STYLE)}'`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join('; ')
}
