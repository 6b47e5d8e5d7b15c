/**
 * The page's state-chart code (browser JavaScript, kept free of backticks and `${` so it can
 * live in this string). It lays out whatever graph `GET /api/machine` returns: states are
 * ranked left to right by the longest path from the initial state, ignoring back edges; the
 * first way out of each state (the happy path) runs straight through the middle row; compound
 * states are drawn as boxes around their children; edges that skip a column run in lanes above
 * or below the chart.
 */
export const CHART_SCRIPT = String.raw`
var SVG_NS = 'http://www.w3.org/2000/svg';

/** Builds an element: h('div', {class: 'x', text: 'hi', onclick: f}, [children]); 'svg:rect' for SVG. */
function h(tag, attrs, children) {
  var el = tag.indexOf('svg:') === 0 ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  var a = attrs || {};
  Object.keys(a).forEach(function (k) {
    var v = a[k];
    if (v === undefined || v === null || v === false) return;
    if (k === 'text') el.textContent = String(v);
    else if (k.indexOf('on') === 0) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  });
  (children || []).forEach(function add(c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) c.forEach(add);
    else el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  });
  return el;
}

var CHART = { nodeW: 150, nodeH: 34, gap: 160, rowH: 74, pad: 26, lane: 16, groupPad: 12, groupHead: 20 };

function layoutMachine(graph) {
  var byId = {};
  graph.nodes.forEach(function (n) { byId[n.id] = n; });
  var leafOf = function (id) {
    var n = byId[id];
    while (n && n.children.length > 0) n = byId[n.children[0]];
    return n ? n.id : id;
  };
  var leaves = graph.nodes.filter(function (n) { return n.children.length === 0; }).map(function (n) { return n.id; });
  var index = {};
  leaves.forEach(function (id, i) { index[id] = i; });

  // One drawn edge per (from, to): its events and guards are listed on it.
  var edges = [], byPair = {}, anyState = [];
  graph.edges.forEach(function (e) {
    if (e.from === '*') { anyState.push(e); return; }
    var from = leafOf(e.from), to = leafOf(e.to), key = from + '>' + to;
    if (!byPair[key]) { byPair[key] = { from: from, to: to, events: [], detail: [] }; edges.push(byPair[key]); }
    if (byPair[key].events.indexOf(e.event) < 0) byPair[key].events.push(e.event);
    byPair[key].detail.push(e.event + (e.guard ? ' [' + e.guard + ']' : '') + (e.reenter ? ' (re-enters)' : ''));
  });
  var out = {};
  leaves.forEach(function (id) { out[id] = []; });
  edges.forEach(function (e) { if (out[e.from]) out[e.from].push(e); });

  // Depth-first from the initial state: edges back to a state on the current path are back edges.
  var mark = {}, pre = [];
  var visit = function (id) {
    mark[id] = 1; pre.push(id);
    out[id].forEach(function (e) {
      if (e.to === id) { e.kind = 'self'; return; }
      if (mark[e.to] === 1) { e.kind = 'back'; return; }
      e.kind = 'forward';
      if (!mark[e.to]) visit(e.to);
    });
    mark[id] = 2;
  };
  var initial = leafOf(graph.initial);
  if (out[initial]) visit(initial);
  leaves.forEach(function (id) { if (!mark[id]) visit(id); });
  var order = {};
  pre.forEach(function (id, i) { order[id] = i; });

  // Longest-path ranks over forward edges; the children of a compound state share one column.
  var rank = {};
  leaves.forEach(function (id) { rank[id] = 0; });
  var groups = graph.nodes.filter(function (n) { return n.children.length > 0 && n.children.every(function (c) { return byId[c] && byId[c].children.length === 0; }); });
  for (var round = 0; round < leaves.length + 2; round++) {
    var moved = false;
    edges.forEach(function (e) {
      if (e.kind === 'forward' && rank[e.to] < rank[e.from] + 1) { rank[e.to] = rank[e.from] + 1; moved = true; }
    });
    groups.forEach(function (g) {
      var r = Math.max.apply(null, g.children.map(function (c) { return rank[c]; }));
      g.children.forEach(function (c) { if (rank[c] !== r) { rank[c] = r; moved = true; } });
    });
    if (!moved) break;
  }

  // The happy path: the first forward way out of each state, from the initial one.
  var spine = {}, s = initial, guard = 0;
  while (s !== undefined && !spine[s] && guard++ < leaves.length) {
    spine[s] = true;
    var next = (out[s] || []).filter(function (e) { return e.kind === 'forward'; })[0];
    s = next ? next.to : undefined;
  }

  var columns = [];
  leaves.forEach(function (id) { (columns[rank[id]] = columns[rank[id]] || []).push(id); });
  var pos = {};
  columns.forEach(function (col, c) {
    col.sort(function (a, b) { return order[a] - order[b]; });
    var middle = col.filter(function (id) { return spine[id]; })[0];
    var arranged = middle === undefined ? [] : [middle];
    col.filter(function (id) { return id !== middle; }).forEach(function (id, i) {
      if (middle === undefined) arranged.push(id);
      else if (i % 2 === 0) arranged.unshift(id);
      else arranged.push(id);
    });
    var at = middle === undefined ? (arranged.length - 1) / 2 : arranged.indexOf(middle);
    arranged.forEach(function (id, i) {
      pos[id] = { x: c * (CHART.nodeW + CHART.gap), y: (i - at) * CHART.rowH, col: c };
    });
  });

  var groupBoxes = groups.map(function (g) {
    var ps = g.children.map(function (c) { return pos[c]; });
    var y0 = Math.min.apply(null, ps.map(function (p) { return p.y; })), y1 = Math.max.apply(null, ps.map(function (p) { return p.y; }));
    return { id: g.id, key: g.key, x: ps[0].x - CHART.groupPad, y: y0 - CHART.groupPad - CHART.groupHead, w: CHART.nodeW + 2 * CHART.groupPad, h: y1 - y0 + CHART.nodeH + 2 * CHART.groupPad + CHART.groupHead, col: ps[0].col };
  });
  // How far each column reaches up and down (a compound state's box included).
  var colTop = [], colBottom = [];
  leaves.forEach(function (id) {
    var p = pos[id], c = p.col;
    colTop[c] = Math.min(colTop[c] === undefined ? Infinity : colTop[c], p.y);
    colBottom[c] = Math.max(colBottom[c] === undefined ? -Infinity : colBottom[c], p.y + CHART.nodeH);
  });
  groupBoxes.forEach(function (b) { colTop[b.col] = Math.min(colTop[b.col], b.y); colBottom[b.col] = Math.max(colBottom[b.col], b.y + b.h); });
  var inGroup = {};
  groups.forEach(function (g) { g.children.forEach(function (c) { inGroup[c] = true; }); });
  // A state at the top (bottom) of its column, outside any box, can be left or entered from above (below).
  var cap = function (id, up) {
    if (inGroup[id]) return false;
    var p = pos[id];
    return up ? p.y === colTop[p.col] : p.y + CHART.nodeH === colBottom[p.col];
  };

  // Edges that skip a column, or go back more than one, run in lanes above or below the
  // columns they span; shorter ones run nearer the chart.
  var long = edges.filter(function (e) {
    var span = pos[e.to].col - pos[e.from].col;
    return e.kind !== 'self' && ((e.kind === 'forward' && span >= 2) || (e.kind !== 'forward' && span !== -1));
  });
  long.sort(function (a, b) { return Math.abs(pos[a.to].col - pos[a.from].col) - Math.abs(pos[b.to].col - pos[b.from].col); });
  var depth = { up: 0, down: 0 };
  var minY = Infinity, maxY = -Infinity;
  colTop.forEach(function (t) { minY = Math.min(minY, t); });
  colBottom.forEach(function (b) { maxY = Math.max(maxY, b); });
  edges.forEach(function (e) { if (e.kind === 'self') minY = Math.min(minY, pos[e.from].y - 44); });
  long.forEach(function (e) {
    var up = e.kind === 'forward' ? pos[e.to].y <= 0 : pos[e.to].y < 0;
    var k = up ? ++depth.up : ++depth.down;
    var c0 = Math.min(pos[e.from].col, pos[e.to].col), c1 = Math.max(pos[e.from].col, pos[e.to].col), edge = up ? Infinity : -Infinity;
    for (var c = c0; c <= c1; c++) edge = up ? Math.min(edge, colTop[c]) : Math.max(edge, colBottom[c]);
    e.lane = { up: up, depth: k, y: up ? edge - 20 - (k - 1) * CHART.lane : edge + 20 + (k - 1) * CHART.lane, fromCap: cap(e.from, up), toCap: cap(e.to, up) };
    minY = Math.min(minY, e.lane.y - 28);
    maxY = Math.max(maxY, e.lane.y + 28);
  });
  var reverse = {};
  edges.forEach(function (e) { reverse[e.from + '>' + e.to] = true; });
  edges.forEach(function (e) { e.paired = e.lane === undefined && e.kind !== 'self' && reverse[e.to + '>' + e.from] === true; });

  var width = columns.length * CHART.nodeW + (columns.length - 1) * CHART.gap + 2 * CHART.pad + 20;
  return {
    leaves: leaves, byId: byId, pos: pos, edges: edges, groups: groupBoxes, anyState: anyState, initial: initial,
    minY: minY - CHART.pad / 2, width: width, height: maxY - minY + CHART.pad, offsetX: CHART.pad + 16
  };
}

/** An edge's events, one per line, stacked up from (x, y) or down from it. */
function edgeLabel(e, x, y, below, anchor) {
  var lines = e.events;
  var first = below ? y + 12 : y - 5 - (lines.length - 1) * 11;
  return h('svg:text', { x: x, y: first, 'text-anchor': anchor || 'middle' }, lines.map(function (ev, i) {
    return h('svg:tspan', { x: x, dy: i === 0 ? 0 : 11, text: ev });
  }));
}

/** A path through points with rounded corners. */
function rounded(points) {
  var d = 'M' + points[0][0] + ' ' + points[0][1];
  for (var i = 1; i < points.length - 1; i++) {
    var p = points[i - 1], q = points[i], n = points[i + 1];
    var r = Math.min(8, (Math.abs(q[0] - p[0]) + Math.abs(q[1] - p[1])) / 2, (Math.abs(n[0] - q[0]) + Math.abs(n[1] - q[1])) / 2);
    var a = [q[0] - Math.sign(q[0] - p[0]) * r, q[1] - Math.sign(q[1] - p[1]) * r];
    var b = [q[0] + Math.sign(n[0] - q[0]) * r, q[1] + Math.sign(n[1] - q[1]) * r];
    d += ' L' + a[0] + ' ' + a[1] + ' Q' + q[0] + ' ' + q[1] + ' ' + b[0] + ' ' + b[1];
  }
  var last = points[points.length - 1];
  return d + ' L' + last[0] + ' ' + last[1];
}

/**
 * The route of an edge in a lane: out of the source's top or bottom when nothing is in the way,
 * else out of its side into the gap beside it; along the lane; into the target the same way.
 */
function laneRoute(e, a, b, W, H, oy) {
  var lane = e.lane, up = lane.up, k = lane.depth, laneY = lane.y + oy, dir = b.x >= a.x ? 1 : -1, pts = [];
  var capX = function (p, other) { return p.x + W / 2 - Math.sign(other.x - p.x || 1) * k * 12; };
  if (lane.fromCap) {
    var sx = capX(a, b);
    pts.push([sx, up ? a.y : a.y + H], [sx, laneY]);
  } else {
    var side = dir > 0 ? a.x + W : a.x, gx = side + dir * (12 + k * 6), sy = a.y + H / 2 + (up ? -6 : 6);
    pts.push([side, sy], [gx, sy], [gx, laneY]);
  }
  if (lane.toCap) {
    var tx = capX(b, a);
    pts.push([tx, laneY], [tx, up ? b.y : b.y + H]);
  } else {
    var tside = dir > 0 ? b.x : b.x + W, tgx = tside - dir * (12 + k * 6), ty = b.y + H / 2 + (up ? -6 : 6);
    pts.push([tgx, laneY], [tgx, ty], [tside, ty]);
  }
  var along = pts.filter(function (p) { return p[1] === laneY; });
  return { d: rounded(pts), lx: (along[0][0] + along[along.length - 1][0]) / 2, ly: laneY, below: !up };
}

/**
 * Draws the chart: 'lit' is the state to highlight, 'visited' the states the run passed through
 * up to it, 'taken' the transition that led there ({from, to}).
 */
function drawChart(L, lit, visited, taken) {
  var W = CHART.nodeW, H = CHART.nodeH, ox = L.offsetX, oy = -L.minY;
  var P = function (id) { var p = L.pos[id]; return { x: p.x + ox, y: p.y + oy, col: p.col }; };
  var parts = [];
  parts.push(h('svg:defs', {}, [
    h('svg:marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, [h('svg:path', { d: 'M0 0 L10 5 L0 10 z', fill: '#b3bac6' })]),
    h('svg:marker', { id: 'arrow-taken', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' }, [h('svg:path', { d: 'M0 0 L10 5 L0 10 z', fill: '#2f6fed' })])
  ]));
  L.groups.forEach(function (g) {
    var active = typeof lit === 'string' && lit.indexOf(g.id + '.') === 0;
    parts.push(h('svg:g', { class: 'state-group' + (active ? ' active' : ''), 'data-state': g.id }, [
      h('svg:rect', { x: g.x + ox, y: g.y + oy, width: g.w, height: g.h, rx: 12 }),
      h('svg:text', { x: g.x + ox + 12, y: g.y + oy + 16, text: g.key })
    ]));
  });
  var labels = [];
  L.edges.forEach(function (e) {
    var a = P(e.from), b = P(e.to), d, label;
    var isTaken = taken && taken.from === e.from && taken.to === e.to;
    if (e.kind === 'self') {
      // On the left of the top side: the middle is where lanes leave upwards.
      var cx = a.x + 34;
      d = 'M' + (cx - 16) + ' ' + a.y + ' C' + (cx - 24) + ' ' + (a.y - 34) + ' ' + (cx + 24) + ' ' + (a.y - 34) + ' ' + (cx + 16) + ' ' + a.y;
      label = edgeLabel(e, cx, a.y - 28, false);
    } else if (e.lane !== undefined) {
      var r = laneRoute(e, a, b, W, H, oy);
      d = r.d;
      label = edgeLabel(e, r.lx, r.below ? r.ly - 2 : r.ly + 2, r.below);
    } else {
      // Between neighbouring columns: a forward edge and its way back run side by side, the
      // forward one above. Labels sit at the right end of the gap, where the curves fan out.
      var back = e.kind !== 'forward';
      var dy = back ? 7 : e.paired ? -7 : 0;
      var sx = back ? a.x : a.x + W, tx = back ? b.x + W : b.x, sy = a.y + H / 2 + dy, ty = b.y + H / 2 + dy, mx = (sx + tx) / 2;
      d = 'M' + sx + ' ' + sy + ' C' + mx + ' ' + sy + ' ' + mx + ' ' + ty + ' ' + tx + ' ' + ty;
      label = back ? edgeLabel(e, sx - 12, sy, true, 'end') : edgeLabel(e, tx - 12, ty, false, 'end');
    }
    parts.push(h('svg:g', { class: 'edge' + (isTaken ? ' taken' : ''), 'data-from': e.from, 'data-to': e.to }, [
      h('svg:title', { text: e.detail.join('\n') }),
      h('svg:path', { d: d, 'marker-end': isTaken ? 'url(#arrow-taken)' : 'url(#arrow)' })
    ]));
    labels.push(h('svg:g', { class: 'edge edge-label' + (isTaken ? ' taken' : ''), 'data-slide': e.lane !== undefined ? 'x' : 'y' }, [h('svg:title', { text: e.detail.join('\n') }), label]));
  });
  var start = P(L.initial);
  parts.push(h('svg:circle', { class: 'start-dot', cx: start.x - 20, cy: start.y + H / 2, r: 5 }));
  parts.push(h('svg:path', { d: 'M' + (start.x - 15) + ' ' + (start.y + H / 2) + ' L' + start.x + ' ' + (start.y + H / 2), stroke: '#1d2330', 'stroke-width': 1.2, 'marker-end': 'url(#arrow)' }));
  L.leaves.forEach(function (id) {
    var p = P(id), node = L.byId[id];
    var cls = 'state-node' + (node.type === 'final' ? ' final' : '') + (visited[id] ? ' visited' : '') + (id === lit ? ' current' : '');
    parts.push(h('svg:g', { class: cls, 'data-state': id, 'data-testid': 'state-node' }, [
      h('svg:title', { text: id }),
      h('svg:rect', { x: p.x, y: p.y, width: W, height: H, rx: node.type === 'final' ? 17 : 8 }),
      h('svg:text', { x: p.x + W / 2, y: p.y + H / 2, text: node.key })
    ]));
  });
  return h('svg:svg', { class: 'chart', 'data-testid': 'chart', 'data-current': lit, viewBox: '0 0 ' + L.width + ' ' + L.height, width: L.width, height: L.height, role: 'img', 'aria-label': 'state chart of the run machine' }, parts.concat(labels));
}

/**
 * Moves edge labels off each other and off the states once the chart is in the page (where
 * their real text boxes can be measured): each label in turn, the first place near its own
 * that hits nothing placed before it. A lane's label slides along its lane, any other up or
 * down; the chart grows if a label moved past its edge.
 */
function untangleLabels(svg) {
  var pad = 2;
  var boxOf = function (el) { var b = el.getBBox(); return { x0: b.x - pad, y0: b.y - pad, x1: b.x + b.width + pad, y1: b.y + b.height + pad }; };
  var hits = function (a, b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; };
  var placed = Array.prototype.map.call(svg.querySelectorAll('.state-node rect'), boxOf);
  var all = [];
  svg.querySelectorAll('.edge-label').forEach(function (g) {
    var text = g.querySelector('text');
    if (!text) return;
    var box = boxOf(text), along = g.getAttribute('data-slide') === 'x', chosen = null;
    var step = along ? 12 : 4;
    for (var i = 0; i <= 60 && chosen === null; i++) {
      var d = (i % 2 === 0 ? 1 : -1) * Math.ceil(i / 2) * step;
      var dx = along ? d : 0, dy = along ? 0 : d;
      var moved = { x0: box.x0 + dx, y0: box.y0 + dy, x1: box.x1 + dx, y1: box.y1 + dy };
      if (!placed.some(function (p) { return hits(moved, p); })) chosen = { dx: dx, dy: dy, box: moved };
    }
    // Nowhere free near its lane: off to the side it is on, below everything placed so far.
    if (chosen === null) {
      var low = Math.max.apply(null, placed.map(function (p) { return p.y1; }));
      chosen = { dx: 0, dy: low - box.y0, box: { x0: box.x0, y0: low, x1: box.x1, y1: low + box.y1 - box.y0 } };
    }
    if (chosen.dx !== 0 || chosen.dy !== 0) g.setAttribute('transform', 'translate(' + chosen.dx + ' ' + chosen.dy + ')');
    placed.push(chosen.box);
    all.push(chosen.box);
  });
  var vb = svg.viewBox.baseVal, x0 = vb.x, y0 = vb.y, x1 = vb.x + vb.width, y1 = vb.y + vb.height;
  all.forEach(function (b) { x0 = Math.min(x0, b.x0); y0 = Math.min(y0, b.y0); x1 = Math.max(x1, b.x1); y1 = Math.max(y1, b.y1); });
  if (x0 !== vb.x || y0 !== vb.y || x1 !== vb.x + vb.width || y1 !== vb.y + vb.height) {
    svg.setAttribute('viewBox', x0 + ' ' + y0 + ' ' + (x1 - x0) + ' ' + (y1 - y0));
    svg.setAttribute('width', x1 - x0);
    svg.setAttribute('height', y1 - y0);
  }
}
`
