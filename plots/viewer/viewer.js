// bcmsync view: draws a pose graph, its estimates and its solve from the
// JSON in #viewer-data on <canvas> elements. No libraries, no network.
// On success the root element gets data-status="ok"; on any error
// data-status="error: ..." and a visible message, so a headless browser
// can tell a rendered page from a broken one.
(function () {
  'use strict';
  var root = document.documentElement;

  function fail(msg) {
    root.setAttribute('data-status', 'error: ' + msg);
    var box = document.getElementById('error');
    if (box) {
      box.hidden = false;
      box.textContent = 'The viewer failed: ' + msg;
    }
  }
  window.addEventListener('error', function (ev) {
    fail((ev.message || 'error') + (ev.lineno ? ' (line ' + ev.lineno + ')' : ''));
  });

  // ---- data ----------------------------------------------------------
  var D = JSON.parse(document.getElementById('viewer-data').textContent);
  var n = D.n, dim = D.d, m = D.m;
  var edges = Int32Array.from(D.edges);
  var isLoop = Uint8Array.from(D.loop);
  // Landmarks are the last nLm vertices (posegraph's order): vertices
  // 0..np-1 are poses, and an edge into a landmark is an observation,
  // a class of its own (kind 2), neither odometry (0) nor loop closure (1).
  var nLm = D.landmarks || 0, np = n - nLm;
  var kind = new Uint8Array(m);
  var nLoops = 0, nObs = 0;
  for (var k = 0; k < m; k++) {
    kind[k] = edges[2 * k + 1] >= np ? 2 : isLoop[k];
    if (kind[k] === 1) nLoops++; else if (kind[k] === 2) nObs++;
  }
  var nOdom = m - nLoops - nObs;

  // Estimate colours (Okabe-Ito): the last estimate (the solution) blue,
  // earlier ones orange, green, purple.
  var EST_COLOURS = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00'];
  function estColour(e) {
    var last = D.estimates.length - 1;
    return e === last ? EST_COLOURS[0] : EST_COLOURS[1 + (e % (EST_COLOURS.length - 1))];
  }
  var LOOP_PLAIN = 'rgba(200, 40, 40, 0.45)';

  // Position covariances of the last estimate's vertices (D.ellipses:
  // xx, xy, yy per vertex), drawn as the ellipses holding 95% of a
  // Gaussian's mass: semi-axes sqrt(5.991 lambda) along the eigenvectors,
  // magnified by ellScale. ellAx holds each vertex's semi-axes and the
  // major axis's angle; zero for the gauge, which has no ellipse.
  var ELL_K = Math.sqrt(5.991464547107979);
  var ELL_COLOUR = 'rgba(142, 68, 173, 0.85)';
  var ELL_SCALES = [1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000];
  var ELL_SEG = 32;
  // At most about ELL_MAX ellipses are drawn (every ellStride-th pose,
  // and every landmark up to as many): thousands overlap into a blot.
  var ELL_MAX = 250;
  var ellXY = D.ellipses ? Float64Array.from(D.ellipses.xy) : null;
  var ellAx = ellXY ? ellipseAxes(ellXY) : null;
  function ellipseAxes(c) {
    var ax = new Float64Array(3 * n);
    for (var v = 0; v < n; v++) {
      var xx = c[3 * v], xy = c[3 * v + 1], yy = c[3 * v + 2];
      var mid = (xx + yy) / 2, rad = Math.sqrt((xx - yy) * (xx - yy) / 4 + xy * xy);
      ax[3 * v] = ELL_K * Math.sqrt(Math.max(mid + rad, 0));
      ax[3 * v + 1] = ELL_K * Math.sqrt(Math.max(mid - rad, 0));
      ax[3 * v + 2] = 0.5 * Math.atan2(2 * xy, xx - yy);
    }
    return ax;
  }
  var OBS_PLAIN = 'rgba(0, 140, 110, 0.35)';

  var ests = D.estimates.map(function (e, idx) {
    var p = new Float64Array(3 * n);
    for (var i = 0; i < n; i++) {
      p[3 * i] = e.pos[dim * i];
      p[3 * i + 1] = e.pos[dim * i + 1];
      p[3 * i + 2] = dim === 3 ? e.pos[dim * i + 2] : 0;
    }
    var h = new Float64Array(3 * n);
    for (var i2 = 0; i2 < n; i2++) {
      if (dim === 2) {
        h[3 * i2] = Math.cos(e.head[i2]);
        h[3 * i2 + 1] = Math.sin(e.head[i2]);
      } else {
        h[3 * i2] = e.head[3 * i2];
        h[3 * i2 + 1] = e.head[3 * i2 + 1];
        h[3 * i2 + 2] = e.head[3 * i2 + 2];
      }
    }
    var cost = Float64Array.from(e.cost);
    return { label: e.label, pos: p, head: h, cost: cost, total: e.total, colour: estColour(idx), scale: costScale(cost) };
  });

  // ---- colour scale ----------------------------------------------------
  // Sequential, light (small cost, recedes into the page) to dark red
  // (large cost, stands out); edges are drawn in order of cost so the
  // worst lie on top.
  var STOPS = [
    [0.00, [196, 210, 226]], [0.25, [122, 163, 206]], [0.50, [92, 94, 168]],
    [0.75, [206, 84, 58]], [1.00, [128, 0, 20]]
  ];
  var NBINS = 48;
  var OBS_SHOWN = 2000;
  var BIN_COLOURS = [];
  for (var b = 0; b < NBINS; b++) BIN_COLOURS.push(rampCSS((b + 0.5) / NBINS));
  function ramp(t) {
    t = Math.max(0, Math.min(1, t));
    for (var s = 1; s < STOPS.length; s++) {
      if (t <= STOPS[s][0]) {
        var a = STOPS[s - 1], c = STOPS[s], u = (t - a[0]) / (c[0] - a[0]);
        return [0, 1, 2].map(function (q) { return Math.round(a[1][q] + u * (c[1][q] - a[1][q])); });
      }
    }
    return STOPS[STOPS.length - 1][1];
  }
  function rampCSS(t) { var c = ramp(t); return 'rgb(' + c[0] + ',' + c[1] + ',' + c[2] + ')'; }

  // costScale maps log10(cost) onto [0, 1] between the 2nd percentile of
  // the positive costs (but at most 5 decades below the largest) and the
  // largest one; smaller costs clamp to 0. Edges that agree with the
  // estimate to rounding error would otherwise stretch the scale over
  // twenty decades and paint everything else one colour.
  function costScale(cost) {
    var logs = [];
    for (var k = 0; k < cost.length; k++) if (cost[k] > 0) logs.push(Math.log10(cost[k]));
    if (logs.length === 0) return { lo: -1, hi: 0, empty: true };
    logs.sort(function (a, b) { return a - b; });
    var hi = logs[logs.length - 1], lo = Math.max(logs[Math.floor(0.02 * (logs.length - 1))], hi - 5);
    if (!(hi - lo > 1e-9)) { lo = hi - 1; }
    return { lo: lo, hi: hi, empty: false };
  }
  function binOf(c, sc) {
    if (!(c > 0)) return 0;
    var t = (Math.log10(c) - sc.lo) / (sc.hi - sc.lo);
    return Math.max(0, Math.min(NBINS - 1, Math.floor(t * NBINS)));
  }

  // ---- number formatting --------------------------------------------------
  function fmt(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return '—';
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) {
      var s = v.toExponential(Math.max(0, (digits || 4) - 1));
      return s.replace(/\.?0+e/, 'e').replace('e+', 'e');
    }
    var t = v.toPrecision(digits || 4);
    if (t.indexOf('.') >= 0 && t.indexOf('e') < 0) t = t.replace(/0+$/, '').replace(/\.$/, '');
    return t;
  }
  function fmtTick(v) {
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1e5 || a < 1e-3) return v.toExponential(0).replace('e+', 'e');
    return String(+v.toPrecision(6));
  }
  function niceStep(raw) {
    var e = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / e;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * e;
  }
  function el(id) { return document.getElementById(id); }

  // ---- header ----------------------------------------------------------------
  el('file-name').textContent = D.title || 'pose graph';
  el('file-meta').textContent = D.problem + ' · ' + np.toLocaleString('en-US') + ' poses · ' +
    (nLm > 0 ? nLm.toLocaleString('en-US') + ' landmarks · ' : '') +
    m.toLocaleString('en-US') + ' edges (' + nLoops.toLocaleString('en-US') + ' loop closures' +
    (nLm > 0 ? ', ' + nObs.toLocaleString('en-US') + ' observations' : '') + ')';
  var badge = el('badge'), R = D.run;
  if (R) {
    badge.textContent = R.certified ? '✓ certified globally optimal' : '✗ ' + R.status;
    badge.className = 'badge ' + (R.certified ? 'ok' : 'bad');
    var stats = [
      ['F (objective)', fmt(R.objective, 10)],
      ['dual bound', R.dual_bound === null ? 'none' : fmt(R.dual_bound, 10)],
      ['gap ≤', R.gap === null ? '—' : fmt(R.gap, 3) + (R.objective ? ' (rel ' + fmt(R.gap / Math.abs(R.objective), 2) + ')' : '')],
      ['λmin(S)', fmt(R.min_eigenvalue, 3)],
      ['rank', String(R.rank)],
      ['init', R.init || '—'],
      ['time', fmt(R.seconds, 3) + ' s']
    ];
    var dl = el('stats');
    stats.forEach(function (s) {
      var div = document.createElement('div'), dt = document.createElement('dt'), dd = document.createElement('dd');
      dt.textContent = s[0]; dd.textContent = s[1];
      div.appendChild(dt); div.appendChild(dd); dl.appendChild(div);
    });
  } else {
    badge.textContent = 'no solve report: certificate unknown';
    badge.className = 'badge none';
  }

  // ---- controls ----------------------------------------------------------------
  var state = {
    est: ests.length - 1, overlay: false,
    odom: true, loops: nLoops > 0, poses: np <= 600, heads: D.problem.charAt(1) === 'O' && np <= 5000,
    // Observations are many short edges that bury the trajectory once
    // there are more than a few per pose: shown by default only up to
    // OBS_SHOWN of them. Landmark markers are always shown at first.
    obs: nObs > 0 && nObs <= OBS_SHOWN, lms: nLm > 0,
    colour: ests.some(function (e) { return !e.scale.empty; }) ? 'cost' : 'plain',
    xaxis: 'iter',
    ell: false, ellScale: 1, ellScaleSet: false
  };
  var choice = el('est-choice');
  ests.forEach(function (e, idx) {
    var lab = document.createElement('label'), inp = document.createElement('input');
    inp.type = 'radio'; inp.name = 'est'; inp.value = String(idx); inp.checked = idx === state.est;
    inp.addEventListener('change', function () { state.est = idx; state.overlay = false; redraw(); });
    lab.appendChild(inp);
    lab.appendChild(document.createTextNode(' ' + e.label));
    var sw = document.createElement('span'); sw.className = 'count'; sw.textContent = '  F = ' + fmt(e.total, 6) +
      (D.rejected > 0 ? ' (without the ' + D.rejected + ' rejected edges)' : '');
    lab.appendChild(sw);
    choice.appendChild(lab);
  });
  if (ests.length > 1) {
    var lab = document.createElement('label'), inp = document.createElement('input');
    inp.type = 'radio'; inp.name = 'est'; inp.value = 'overlay';
    inp.addEventListener('change', function () { state.overlay = true; redraw(); });
    lab.appendChild(inp); lab.appendChild(document.createTextNode(' overlay all'));
    choice.appendChild(lab);
  }
  function bindCheck(id, key) {
    var c = el(id); c.checked = state[key];
    c.addEventListener('change', function () { state[key] = c.checked; redraw(); });
  }
  bindCheck('show-odom', 'odom'); bindCheck('show-loops', 'loops');
  bindCheck('show-poses', 'poses'); bindCheck('show-heads', 'heads');
  bindCheck('show-obs', 'obs'); bindCheck('show-lms', 'lms');
  bindCheck('show-ell', 'ell');
  if (ellAx) {
    el('ell-box').hidden = false; el('ell-scale-box').hidden = false; el('ell-note').hidden = false;
    el('ell-note').textContent = (D.ellipses.note || '') + (dim === 3 ?
      ' Each ellipse is the x–y marginal (the projection of the covariance on the horizontal plane), drawn at the vertex’s height.' : '');
    ELL_SCALES.forEach(function (f) {
      var o = document.createElement('option');
      o.value = String(f); o.textContent = '×' + f.toLocaleString('en-US');
      el('ell-scale').appendChild(o);
    });
    el('ell-scale').addEventListener('change', function () {
      state.ellScale = +el('ell-scale').value; state.ellScaleSet = true; redraw();
    });
  }
  // autoEllScale is the smallest magnification in ELL_SCALES at which the
  // median ellipse's major semi-axis spans 0.4% of the scene: covariances
  // of a well-measured map are millimetres on a map of kilometres.
  function autoEllScale() {
    var a = [];
    for (var i = 0; i < n; i++) if (ellAx[3 * i] > 0) a.push(ellAx[3 * i]);
    if (a.length === 0) return 1;
    a.sort(function (p, q) { return p - q; });
    var med = a[Math.floor(a.length / 2)], want = 0.004 * (bounds ? bounds.ext : 1);
    for (var k = 0; k < ELL_SCALES.length; k++) if (ELL_SCALES[k] * med >= want) return ELL_SCALES[k];
    return ELL_SCALES[ELL_SCALES.length - 1];
  }
  el('n-odom').textContent = '(' + nOdom.toLocaleString('en-US') + ')';
  el('n-loops').textContent = '(' + nLoops.toLocaleString('en-US') + ')';
  el('n-poses').textContent = '(' + np.toLocaleString('en-US') + ')';
  el('n-obs').textContent = '(' + nObs.toLocaleString('en-US') + ')';
  el('n-lms').textContent = '(' + nLm.toLocaleString('en-US') + ')';
  if (nLoops === 0) el('show-loops').disabled = true;
  if (nLm > 0) { el('lm-obs').hidden = false; el('lm-marks').hidden = false; }
  el('colour-cost').checked = state.colour === 'cost';
  el('colour-plain').checked = state.colour === 'plain';
  Array.prototype.forEach.call(document.querySelectorAll('input[name=colour]'), function (r) {
    r.addEventListener('change', function () { state.colour = r.value; redraw(); });
  });
  if (D.layout) el('layout-note').textContent = D.layout + '.';

  // ---- the scene: projection ---------------------------------------------------------
  var scene = el('scene'), over = el('overlay'), stage = el('stage');
  var ctx = scene.getContext('2d'), octx = over.getContext('2d');
  var W = 0, H = 0, dpr = 1;
  var sx = new Float32Array(n), sy = new Float32Array(n), vis = new Uint8Array(n);
  var cam = { cx: 0, cy: 0, cz: 0, scale: 1, yaw: -0.9, pitch: 0.55, dist: 1, ortho: false, grid: true };
  var bounds = null;

  function sceneBounds() {
    var lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
    ests.forEach(function (e, idx) {
      if (!state.overlay && idx !== state.est) return;
      for (var i = 0; i < n; i++) for (var a = 0; a < 3; a++) {
        var v = e.pos[3 * i + a];
        if (v < lo[a]) lo[a] = v;
        if (v > hi[a]) hi[a] = v;
      }
    });
    var ext = Math.max(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
    if (!(ext > 0)) ext = 1;
    return { lo: lo, hi: hi, ext: ext };
  }
  function fit() {
    bounds = sceneBounds();
    var lo = bounds.lo, hi = bounds.hi;
    cam.cx = (lo[0] + hi[0]) / 2; cam.cy = (lo[1] + hi[1]) / 2; cam.cz = (lo[2] + hi[2]) / 2;
    if (dim === 2) {
      var w = Math.max(hi[0] - lo[0], 1e-9 * bounds.ext), h = Math.max(hi[1] - lo[1], 1e-9 * bounds.ext);
      cam.scale = 0.9 * Math.min((W - 60) / w, (H - 40) / h);
      if (!isFinite(cam.scale) || cam.scale <= 0) cam.scale = 1;
    } else {
      var diag = Math.sqrt(Math.pow(hi[0] - lo[0], 2) + Math.pow(hi[1] - lo[1], 2) + Math.pow(hi[2] - lo[2], 2)) || 1;
      // Start with the bounding box's circumsphere filling the shorter
      // side, then move in until the poses themselves fill the view:
      // a flat scene seen from above would otherwise be small.
      cam.dist = (diag / 2) / Math.sin(FOV / 2);
      var e = ests[state.est], stride = Math.max(1, Math.floor(n / 4000));
      for (var it = 0; it < 3; it++) {
        projectInto(e.pos, sx, sy, vis);
        var need = 0;
        for (var i = 0; i < n; i += stride) {
          if (!vis[i]) { need = Infinity; break; }
          need = Math.max(need, Math.abs(sx[i] - W / 2) / (0.45 * W), Math.abs(sy[i] - H / 2) / (0.45 * H));
        }
        if (!(need > 0) || !isFinite(need)) break;
        cam.dist *= need;
      }
    }
  }
  var FOV = 40 * Math.PI / 180;
  function focal() { return 0.5 * Math.min(W, H) / Math.tan(FOV / 2); }
  // basis: the camera's right, up and forward vectors and its position.
  function basis() {
    var cp = Math.cos(cam.pitch), sp = Math.sin(cam.pitch), cyw = Math.cos(cam.yaw), syw = Math.sin(cam.yaw);
    var back = [cp * cyw, cp * syw, sp]; // from the target to the camera
    var fwd = [-back[0], -back[1], -back[2]];
    var right = [fwd[1], -fwd[0], 0]; // fwd x z
    var rl = Math.hypot(right[0], right[1]);
    if (rl < 1e-9) { right = [-syw, cyw, 0]; rl = 1; }
    right = [right[0] / rl, right[1] / rl, 0];
    var up = [right[1] * fwd[2] - right[2] * fwd[1], right[2] * fwd[0] - right[0] * fwd[2], right[0] * fwd[1] - right[1] * fwd[0]];
    return {
      right: right, up: up, fwd: fwd,
      eye: [cam.cx + cam.dist * back[0], cam.cy + cam.dist * back[1], cam.cz + cam.dist * back[2]]
    };
  }
  // projectInto fills sx, sy, vis with the screen positions of pos.
  function projectInto(pos, X, Y, V) {
    if (dim === 2) {
      var s = cam.scale, ox = W / 2 - cam.cx * s, oy = H / 2 + cam.cy * s;
      for (var i = 0; i < n; i++) {
        X[i] = ox + pos[3 * i] * s; Y[i] = oy - pos[3 * i + 1] * s; V[i] = 1;
      }
      return;
    }
    var B = basis(), f = focal(), near = 1e-3 * cam.dist, cx = W / 2, cy = H / 2;
    var r0 = B.right[0], r1 = B.right[1], r2 = B.right[2], u0 = B.up[0], u1 = B.up[1], u2 = B.up[2];
    var f0 = B.fwd[0], f1 = B.fwd[1], f2 = B.fwd[2], e0 = B.eye[0], e1 = B.eye[1], e2 = B.eye[2];
    var k = f / cam.dist;
    for (var j = 0; j < n; j++) {
      var x = pos[3 * j] - e0, y = pos[3 * j + 1] - e1, z = pos[3 * j + 2] - e2;
      var xc = x * r0 + y * r1 + z * r2, yc = x * u0 + y * u1 + z * u2, zc = x * f0 + y * f1 + z * f2;
      if (cam.ortho) {
        X[j] = cx + k * xc; Y[j] = cy - k * yc; V[j] = 1;
      } else if (zc > near) {
        X[j] = cx + f * xc / zc; Y[j] = cy - f * yc / zc; V[j] = 1;
      } else {
        V[j] = 0;
      }
    }
  }
  function projectPoint(p) {
    if (dim === 2) return [W / 2 + (p[0] - cam.cx) * cam.scale, H / 2 - (p[1] - cam.cy) * cam.scale, 1];
    var B = basis(), f = focal();
    var x = p[0] - B.eye[0], y = p[1] - B.eye[1], z = p[2] - B.eye[2];
    var xc = x * B.right[0] + y * B.right[1] + z * B.right[2];
    var yc = x * B.up[0] + y * B.up[1] + z * B.up[2];
    var zc = x * B.fwd[0] + y * B.fwd[1] + z * B.fwd[2];
    if (cam.ortho) return [W / 2 + f / cam.dist * xc, H / 2 - f / cam.dist * yc, 1];
    if (zc <= 1e-3 * cam.dist) return [0, 0, 0];
    return [W / 2 + f * xc / zc, H / 2 - f * yc / zc, 1];
  }

  // ---- the scene: drawing --------------------------------------------------------------
  var interacting = false;
  var MAX_FAST = 60000; // segments drawn per frame while the view moves
  var binsOdom = [], binsLoop = [], binsObs = [];
  function resize() {
    dpr = window.devicePixelRatio || 1;
    var r = stage.getBoundingClientRect();
    W = Math.max(50, r.width); H = Math.max(50, r.height);
    [scene, over].forEach(function (c) {
      c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
    });
  }

  // drawEdges strokes the chosen edges of one estimate: by cost bin (cost
  // colouring) or in one colour, odometry thicker than loop closures, and
  // landmark observations thinnest, under both.
  function drawEdges(e, coloured, stride) {
    var sc = e.scale;
    var want = [state.odom, state.loops, state.obs];
    if (coloured && !sc.empty) {
      var lists = [binsOdom, binsLoop, binsObs];
      for (var b = 0; b < NBINS; b++) { binsOdom[b] = []; binsLoop[b] = []; binsObs[b] = []; }
      for (var k = 0; k < m; k += stride) {
        var kd = kind[k];
        if (!want[kd]) continue;
        var i = edges[2 * k], j = edges[2 * k + 1];
        if (!vis[i] || !vis[j]) continue;
        lists[kd][binOf(e.cost[k], sc)].push(k);
      }
      ctx.lineCap = 'round';
      // Bin by bin, so a costly observation still lies over a cheap
      // odometry edge.
      for (var b2 = 0; b2 < NBINS; b2++) {
        strokeList(binsObs[b2], BIN_COLOURS[b2], 0.6);
        strokeList(binsLoop[b2], BIN_COLOURS[b2], 0.9);
        strokeList(binsOdom[b2], BIN_COLOURS[b2], 1.6);
      }
      return;
    }
    if (want[2]) strokeKind(2, OBS_PLAIN, 0.6, stride);
    if (want[1]) strokeKind(1, LOOP_PLAIN, 0.8, stride);
    if (want[0]) strokeKind(0, e.colour, 1.4, stride);
  }
  function strokeList(list, colour, width) {
    if (list.length === 0) return;
    ctx.beginPath();
    for (var q = 0; q < list.length; q++) {
      var k = list[q], i = edges[2 * k], j = edges[2 * k + 1];
      ctx.moveTo(sx[i], sy[i]); ctx.lineTo(sx[j], sy[j]);
    }
    ctx.strokeStyle = colour; ctx.lineWidth = width; ctx.stroke();
  }
  function strokeKind(which, colour, width, stride) {
    ctx.beginPath();
    for (var k = 0; k < m; k += stride) {
      if (kind[k] !== which) continue;
      var i = edges[2 * k], j = edges[2 * k + 1];
      if (!vis[i] || !vis[j]) continue;
      ctx.moveTo(sx[i], sy[i]); ctx.lineTo(sx[j], sy[j]);
    }
    ctx.strokeStyle = colour; ctx.lineWidth = width; ctx.lineCap = 'round'; ctx.stroke();
  }
  // maxIncident is, per estimate, each pose's largest incident edge cost.
  function maxIncident(e) {
    if (e.maxInc) return e.maxInc;
    var a = new Float64Array(n);
    for (var k = 0; k < m; k++) {
      var c = e.cost[k], i = edges[2 * k], j = edges[2 * k + 1];
      if (c > a[i]) a[i] = c;
      if (c > a[j]) a[j] = c;
    }
    e.maxInc = a;
    return a;
  }
  function drawPoses(e, coloured, stride) {
    var r = n > 20000 ? 1 : 1.6;
    if (coloured && !e.scale.empty) {
      var mi = maxIncident(e), bins = [];
      for (var b = 0; b < NBINS; b++) bins.push([]);
      for (var i = 0; i < np; i += stride) if (vis[i]) bins[binOf(mi[i], e.scale)].push(i);
      for (var b2 = 0; b2 < NBINS; b2++) {
        if (!bins[b2].length) continue;
        ctx.beginPath();
        bins[b2].forEach(function (i) { ctx.rect(sx[i] - r, sy[i] - r, 2 * r, 2 * r); });
        ctx.fillStyle = BIN_COLOURS[b2]; ctx.fill();
      }
      return;
    }
    ctx.beginPath();
    for (var j = 0; j < np; j += stride) if (vis[j]) ctx.rect(sx[j] - r, sy[j] - r, 2 * r, 2 * r);
    ctx.fillStyle = e.colour; ctx.fill();
  }
  // drawLandmarks draws each landmark as a hollow triangle, in 2-D and
  // 3-D alike (a screen-space marker, unlike the poses' square dots),
  // coloured by its largest observation cost or by the estimate.
  function triangle(x, y, r) {
    ctx.moveTo(x, y - r); ctx.lineTo(x + 0.866 * r, y + 0.5 * r); ctx.lineTo(x - 0.866 * r, y + 0.5 * r); ctx.closePath();
  }
  function drawLandmarks(e, coloured) {
    var r = nLm > 5000 ? 2.5 : 4;
    ctx.lineWidth = 1.3; ctx.lineJoin = 'round';
    if (coloured && !e.scale.empty) {
      var mi = maxIncident(e), bins = [];
      for (var b = 0; b < NBINS; b++) bins.push([]);
      for (var i = np; i < n; i++) if (vis[i]) bins[binOf(mi[i], e.scale)].push(i);
      for (var b2 = 0; b2 < NBINS; b2++) {
        if (!bins[b2].length) continue;
        ctx.beginPath();
        bins[b2].forEach(function (i) { triangle(sx[i], sy[i], r); });
        ctx.strokeStyle = BIN_COLOURS[b2]; ctx.stroke();
      }
      return;
    }
    ctx.beginPath();
    for (var j = np; j < n; j++) if (vis[j]) triangle(sx[j], sy[j], r);
    ctx.strokeStyle = e.colour; ctx.stroke();
  }
  // drawEllipses strokes the 95% ellipse of each vertex's position, at
  // the magnification state.ellScale: in 2-D with the canvas's own
  // ellipse, in 3-D as a polygon in the horizontal plane through the
  // vertex, projected by the camera.
  function ellStride(count) { return Math.max(1, Math.ceil(count / ELL_MAX)); }
  function drawEllipses(e, stride) {
    var f = state.ellScale, p = [0, 0, 0];
    var sp = stride * ellStride(np), sl = stride * ellStride(nLm);
    ctx.beginPath();
    for (var i = 0; i < n; i += i < np ? sp : sl) {
      if (i >= np && !state.lms) break;
      var a = f * ellAx[3 * i], b = f * ellAx[3 * i + 1], ph = ellAx[3 * i + 2];
      if (!(a > 0) || !vis[i]) continue;
      if (dim === 2) {
        var rx = a * cam.scale, ry = b * cam.scale;
        if (rx < 0.5) continue; // below a pixel
        ctx.moveTo(sx[i] + rx * Math.cos(ph), sy[i] - rx * Math.sin(ph));
        ctx.ellipse(sx[i], sy[i], rx, Math.max(ry, 0.05), -ph, 0, 2 * Math.PI);
        continue;
      }
      var c = Math.cos(ph), s = Math.sin(ph), started = false;
      for (var k = 0; k <= ELL_SEG; k++) {
        var t = 2 * Math.PI * k / ELL_SEG, u = a * Math.cos(t), w = b * Math.sin(t);
        p[0] = e.pos[3 * i] + c * u - s * w; p[1] = e.pos[3 * i + 1] + s * u + c * w; p[2] = e.pos[3 * i + 2];
        var q = projectPoint(p);
        if (!q[2]) { started = false; continue; }
        if (started) ctx.lineTo(q[0], q[1]); else { ctx.moveTo(q[0], q[1]); started = true; }
      }
    }
    ctx.strokeStyle = ELL_COLOUR; ctx.lineWidth = 1; ctx.stroke();
  }

  // drawHeadings draws each pose's R e_1 as a short tick of fixed length
  // on screen.
  function drawHeadings(e, stride) {
    var len = 9, eps = 0.01 * cam.dist / focal(), p = [0, 0, 0];
    ctx.beginPath();
    for (var i = 0; i < np; i += stride) {
      if (!vis[i]) continue;
      var dx, dy;
      if (dim === 2) {
        dx = e.head[3 * i]; dy = -e.head[3 * i + 1];
      } else {
        // The tick's direction is the projection of a short step along
        // R e_1 from the pose.
        for (var a = 0; a < 3; a++) p[a] = e.pos[3 * i + a] + eps * e.head[3 * i + a];
        var q = projectPoint(p);
        if (!q[2]) continue;
        dx = q[0] - sx[i]; dy = q[1] - sy[i];
      }
      var l = Math.hypot(dx, dy);
      if (!(l > 1e-9)) continue;
      ctx.moveTo(sx[i], sy[i]); ctx.lineTo(sx[i] + len * dx / l, sy[i] + len * dy / l);
    }
    ctx.strokeStyle = 'rgba(30, 36, 48, 0.75)'; ctx.lineWidth = 1; ctx.stroke();
  }

  function drawGrid2() {
    var step = niceStep(90 / cam.scale);
    var x0 = cam.cx - W / 2 / cam.scale, x1 = cam.cx + W / 2 / cam.scale;
    var y0 = cam.cy - H / 2 / cam.scale, y1 = cam.cy + H / 2 / cam.scale;
    ctx.beginPath();
    for (var x = Math.ceil(x0 / step) * step; x <= x1; x += step) {
      var px = Math.round(W / 2 + (x - cam.cx) * cam.scale) + 0.5;
      ctx.moveTo(px, 0); ctx.lineTo(px, H);
    }
    for (var y = Math.ceil(y0 / step) * step; y <= y1; y += step) {
      var py = Math.round(H / 2 - (y - cam.cy) * cam.scale) + 0.5;
      ctx.moveTo(0, py); ctx.lineTo(W, py);
    }
    ctx.strokeStyle = '#eceff3'; ctx.lineWidth = 1; ctx.stroke();
    return step;
  }
  function drawAxes2(step) {
    // Tick labels along the bottom and left edges, on a white band.
    ctx.fillStyle = 'rgba(255,255,255,0.85)';
    ctx.fillRect(0, H - 18, W, 18); ctx.fillRect(0, 0, 44, H - 18);
    ctx.fillStyle = '#677085'; ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center'; ctx.textBaseline = 'bottom';
    var x0 = cam.cx - W / 2 / cam.scale, x1 = cam.cx + W / 2 / cam.scale;
    for (var x = Math.ceil(x0 / step) * step; x <= x1; x += step) {
      var px = W / 2 + (x - cam.cx) * cam.scale;
      if (px > 50 && px < W - 20) ctx.fillText(fmtTick(Math.abs(x) < step * 1e-9 ? 0 : x), px, H - 3);
    }
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    var y0 = cam.cy - H / 2 / cam.scale, y1 = cam.cy + H / 2 / cam.scale;
    for (var y = Math.ceil(y0 / step) * step; y <= y1; y += step) {
      var py = H / 2 - (y - cam.cy) * cam.scale;
      if (py > 10 && py < H - 24) ctx.fillText(fmtTick(Math.abs(y) < step * 1e-9 ? 0 : y), 40, py);
    }
    ctx.textAlign = 'left'; ctx.textBaseline = 'bottom';
    ctx.fillText('x', W - 14, H - 3);
    ctx.textBaseline = 'top'; ctx.fillText('y', 4, 4);
  }
  function drawGrid3() {
    if (!cam.grid) return 0;
    var b = bounds, step = niceStep(b.ext / 8);
    var z = b.lo[2], pad = step;
    var x0 = Math.floor((b.lo[0] - pad) / step) * step, x1 = Math.ceil((b.hi[0] + pad) / step) * step;
    var y0 = Math.floor((b.lo[1] - pad) / step) * step, y1 = Math.ceil((b.hi[1] + pad) / step) * step;
    ctx.beginPath();
    var seg = function (a, c) {
      var p = projectPoint(a), q = projectPoint(c);
      if (p[2] && q[2]) { ctx.moveTo(p[0], p[1]); ctx.lineTo(q[0], q[1]); }
    };
    for (var x = x0; x <= x1 + 1e-9 * step; x += step) seg([x, y0, z], [x, y1, z]);
    for (var y = y0; y <= y1 + 1e-9 * step; y += step) seg([x0, y, z], [x1, y, z]);
    ctx.strokeStyle = '#e6e9ee'; ctx.lineWidth = 1; ctx.stroke();
    return step;
  }
  // drawTriad draws the world axes, rotated like the scene, in the
  // lower left corner.
  function drawTriad() {
    var B = basis(), o = [44, H - 44], L = 26;
    var names = ['x', 'y', 'z'], cols = ['#c0392b', '#2e8b57', '#1f5fbf'];
    octx.save();
    octx.font = '11px system-ui, sans-serif'; octx.textAlign = 'center'; octx.textBaseline = 'middle';
    for (var a = 0; a < 3; a++) {
      var v = [0, 0, 0]; v[a] = 1;
      var dx = v[0] * B.right[0] + v[1] * B.right[1] + v[2] * B.right[2];
      var dy = v[0] * B.up[0] + v[1] * B.up[1] + v[2] * B.up[2];
      octx.beginPath(); octx.moveTo(o[0], o[1]); octx.lineTo(o[0] + L * dx, o[1] - L * dy);
      octx.strokeStyle = cols[a]; octx.lineWidth = 2; octx.stroke();
      octx.fillStyle = cols[a]; octx.fillText(names[a], o[0] + (L + 9) * dx, o[1] - (L + 9) * dy);
    }
    octx.restore();
  }
  // drawScaleBar draws a bar of a round length near the lower right
  // corner, measured at the scene's centre.
  function drawScaleBar(gridStep) {
    // In 3-D both projections scale the target's depth by focal / dist.
    var pxPerUnit = dim === 2 ? cam.scale : focal() / cam.dist;
    var len = niceStep(110 / pxPerUnit), px = len * pxPerUnit;
    var x1 = W - 20, x0 = x1 - px, y = H - (dim === 2 ? 30 : 18);
    octx.save();
    octx.fillStyle = 'rgba(255,255,255,0.8)'; octx.fillRect(x0 - 8, y - 20, px + 16, 28);
    octx.strokeStyle = '#1d2430'; octx.lineWidth = 1.5;
    octx.beginPath(); octx.moveTo(x0, y - 4); octx.lineTo(x0, y); octx.lineTo(x1, y); octx.lineTo(x1, y - 4); octx.stroke();
    octx.fillStyle = '#1d2430'; octx.font = '11px system-ui, sans-serif'; octx.textAlign = 'center'; octx.textBaseline = 'bottom';
    var txt = fmtTick(len) + (dim === 3 ? (cam.ortho ? '' : ' (at centre)') : '');
    octx.fillText(txt, (x0 + x1) / 2, y - 5);
    if (dim === 3 && gridStep) {
      octx.textAlign = 'right'; octx.fillStyle = '#677085';
      octx.fillText('ground grid ' + fmtTick(gridStep), x1, y - 22);
    }
    octx.restore();
  }

  var lastDrawMs = 0, hover = -1;
  function draw() {
    var t0 = performance.now();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.fillStyle = '#ffffff'; ctx.fillRect(0, 0, W, H);
    var gridStep = dim === 2 ? drawGrid2() : drawGrid3();
    var order = [];
    if (state.overlay) { for (var e = 0; e < ests.length; e++) if (e !== state.est) order.push(e); }
    order.push(state.est);
    var total = (state.odom ? nOdom : 0) + (state.loops ? nLoops : 0) + (state.obs ? nObs : 0);
    var stride = interacting && total * order.length > MAX_FAST ? Math.ceil(total * order.length / MAX_FAST) : 1;
    order.forEach(function (idx, pos) {
      var est = ests[idx], top = pos === order.length - 1;
      projectInto(est.pos, sx, sy, vis);
      ctx.globalAlpha = top ? 1 : 0.55;
      drawEdges(est, top && state.colour === 'cost', stride);
      if (state.poses) drawPoses(est, top && state.colour === 'cost', stride);
      if (state.lms && nLm > 0) drawLandmarks(est, top && state.colour === 'cost');
      if (state.heads && top) drawHeadings(est, stride);
      if (state.ell && ellAx && top && idx === ests.length - 1) drawEllipses(est, stride);
    });
    ctx.globalAlpha = 1;
    if (dim === 2) drawAxes2(gridStep);
    drawOverlay(gridStep);
    lastDrawMs = performance.now() - t0;
    root.setAttribute(interacting ? 'data-draw-ms-moving' : 'data-draw-ms', lastDrawMs.toFixed(1));
  }
  var lastGridStep = 0;
  function drawOverlay(gridStep) {
    if (gridStep !== undefined) lastGridStep = gridStep;
    octx.setTransform(dpr, 0, 0, dpr, 0, 0);
    octx.clearRect(0, 0, W, H);
    if (dim === 3) drawTriad();
    drawScaleBar(lastGridStep);
    if (hover >= 0 && vis[hover]) {
      octx.beginPath(); octx.arc(sx[hover], sy[hover], 6, 0, 2 * Math.PI);
      octx.strokeStyle = '#1d2430'; octx.lineWidth = 1.5; octx.stroke();
    }
  }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); legend(); });
  }

  // ---- legend and info ---------------------------------------------------------------
  function legend() {
    var box = el('legend');
    box.textContent = '';
    var e = ests[state.est], coloured = state.colour === 'cost' && !e.scale.empty;
    var rows = [];
    var shown = state.overlay ? ests.map(function (_, i) { return i; }) : [state.est];
    shown.forEach(function (i) {
      var top = i === state.est;
      rows.push([ests[i].label + (top && coloured ? ' (by cost)' : ''), top && coloured ? rampCSS(0.85) : ests[i].colour, false]);
    });
    if (state.loops && nLoops > 0) rows.push(['loop closures', coloured ? rampCSS(0.6) : LOOP_PLAIN, true]);
    if (state.obs && nObs > 0) rows.push(['landmark observations', coloured ? rampCSS(0.4) : OBS_PLAIN, true]);
    if (state.lms && nLm > 0) rows.push(['landmarks', coloured ? rampCSS(0.85) : e.colour, 'tri']);
    if (state.ell && ellAx && state.est === ests.length - 1) {
      var every = ellStride(np);
      rows.push(['95% position ellipses' + (state.ellScale !== 1 ? ', magnified ×' + state.ellScale.toLocaleString('en-US') : '') +
        (every > 1 ? ', every ' + every + (every === 2 ? 'nd' : every === 3 ? 'rd' : 'th') + ' pose' : ''), ELL_COLOUR, true]);
    }
    rows.forEach(function (r) {
      var div = document.createElement('div'); div.className = 'row';
      var sw = document.createElement('span'); sw.className = 'swatch' + (r[2] === 'tri' ? ' tri' : r[2] ? ' thin' : '');
      if (r[2] === 'tri') { sw.textContent = '△'; sw.style.color = r[1]; } else sw.style.borderTopColor = r[1];
      var tx = document.createElement('span'); tx.textContent = r[0];
      div.appendChild(sw); div.appendChild(tx); box.appendChild(div);
    });
    var cb = el('colourbar'), note = el('cost-note');
    cb.hidden = !coloured;
    if (!coloured) {
      note.textContent = e.scale.empty ? 'Every edge cost is zero at this estimate.' : '';
      return;
    }
    note.textContent = 'Edge cost ' + (D.problem.charAt(1) === 'O' ? 'κ‖Rⱼ − Rᵢ R̃ᵢⱼ‖²' : 'κ‖Rⱼ − Rᵢ R̃ᵢⱼ‖² + τ‖tⱼ − tᵢ − Rᵢ t̃ᵢⱼ‖²') +
      ' at “' + e.label + '”, log scale; ' + (nLm > 0 ? 'poses and landmarks take' : 'poses take') + ' their largest edge cost.';
    var c2 = cb.getContext('2d'), w = 220, h = 46, r = window.devicePixelRatio || 1;
    cb.width = w * r; cb.height = h * r; c2.setTransform(r, 0, 0, r, 0, 0);
    c2.clearRect(0, 0, w, h);
    var x0 = 14, x1 = w - 16, bar = 12;
    for (var b = 0; b < NBINS; b++) {
      c2.fillStyle = BIN_COLOURS[b];
      c2.fillRect(x0 + (x1 - x0) * b / NBINS, 4, (x1 - x0) / NBINS + 0.6, bar);
    }
    c2.strokeStyle = '#9aa1ad'; c2.lineWidth = 1; c2.strokeRect(x0 + 0.5, 4.5, x1 - x0 - 1, bar - 1);
    var sc = e.scale, span = sc.hi - sc.lo;
    var stepDec = Math.max(1, Math.ceil(span / 4));
    c2.fillStyle = '#1d2430'; c2.font = '10.5px system-ui, sans-serif'; c2.textAlign = 'center'; c2.textBaseline = 'top';
    c2.beginPath();
    for (var p = Math.ceil(sc.lo); p <= Math.floor(sc.hi); p += stepDec) {
      var x = x0 + (x1 - x0) * (p - sc.lo) / span;
      c2.moveTo(x, 4 + bar); c2.lineTo(x, 8 + bar);
      c2.fillText('1e' + p, x, 10 + bar);
    }
    c2.strokeStyle = '#1d2430'; c2.stroke();
    if (Math.floor(sc.hi) - Math.ceil(sc.lo) < 1) { // less than a decade: label the ends
      c2.textAlign = 'left'; c2.fillText(fmt(Math.pow(10, sc.lo), 2), x0, 10 + bar);
      c2.textAlign = 'right'; c2.fillText(fmt(Math.pow(10, sc.hi), 2), x1, 10 + bar);
    }
    c2.textAlign = 'left'; c2.fillStyle = '#677085';
    c2.fillText('max ' + fmt(Math.pow(10, sc.hi), 3), x0, 26 + bar);
  }

  // sdText gives a vertex's position standard deviations, when the page
  // has covariances and the last estimate is shown.
  function sdText(i) {
    if (!ellXY || state.est !== ests.length - 1) return '';
    var xx = ellXY[3 * i], yy = ellXY[3 * i + 2];
    if (!(xx > 0) && !(yy > 0)) return '\nsd x, y: 0 (the gauge, held fixed)';
    return '\nsd x ' + fmt(Math.sqrt(xx), 3) + ', y ' + fmt(Math.sqrt(yy), 3);
  }
  function showInfo(i) {
    var info = el('info');
    if (i < 0) { info.textContent = nLm > 0 ? 'Hover over a pose or landmark.' : 'Hover over a pose for details.'; return; }
    var e = ests[state.est], mi = maxIncident(e), deg = 0, obs = 0;
    for (var k = 0; k < m; k++) {
      if (edges[2 * k] === i || edges[2 * k + 1] === i) { deg++; if (kind[k] === 2) obs++; }
    }
    var p = [e.pos[3 * i], e.pos[3 * i + 1], e.pos[3 * i + 2]].slice(0, dim).map(function (v) { return fmt(v, 6); });
    if (i >= np) {
      info.textContent = 'landmark ' + D.ids[i] + '  (index ' + i + ')\n' + 'position (' + p.join(', ') + ')\n' +
        'seen by ' + deg + (deg === 1 ? ' pose' : ' poses') + ', largest cost ' + fmt(mi[i], 4) + sdText(i);
      return;
    }
    info.textContent = 'pose ' + D.ids[i] + '  (index ' + i + ')\n' + 'position (' + p.join(', ') + ')\n' +
      deg + ' edges' + (obs > 0 ? ' (' + obs + ' observations)' : '') + ', largest cost ' + fmt(mi[i], 4) + sdText(i);
  }

  // ---- interaction ---------------------------------------------------------------------
  var drag = null, idleTimer = 0, userMoved = false;
  function settle() {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(function () { interacting = false; redraw(); }, 160);
  }
  scene.addEventListener('mousedown', function (ev) {
    drag = { x: ev.clientX, y: ev.clientY, pan: dim === 2 || ev.shiftKey || ev.button === 2 };
    userMoved = true;
    scene.style.cursor = 'grabbing';
    interacting = true;
    ev.preventDefault();
  });
  scene.addEventListener('contextmenu', function (ev) { ev.preventDefault(); });
  window.addEventListener('mouseup', function () {
    if (!drag) return;
    drag = null; scene.style.cursor = 'grab'; settle();
  });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) { hoverAt(ev); return; }
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    drag.x = ev.clientX; drag.y = ev.clientY;
    if (dim === 2) {
      cam.cx -= dx / cam.scale; cam.cy += dy / cam.scale;
    } else if (drag.pan) {
      var B = basis(), s = cam.dist / focal();
      for (var a = 0; a < 3; a++) {
        var d = -dx * s * B.right[a] + dy * s * B.up[a];
        if (a === 0) cam.cx += d; else if (a === 1) cam.cy += d; else cam.cz += d;
      }
    } else {
      cam.yaw -= dx * 0.008;
      cam.pitch = Math.max(-1.5607, Math.min(1.5607, cam.pitch + dy * 0.008));
    }
    redraw();
  });
  scene.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    userMoved = true;
    var f = Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0015));
    if (dim === 2) {
      // Zoom about the cursor: the world point under it stays put.
      var r = scene.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
      var wx = cam.cx + (mx - W / 2) / cam.scale, wy = cam.cy - (my - H / 2) / cam.scale;
      cam.scale *= f;
      cam.cx = wx - (mx - W / 2) / cam.scale; cam.cy = wy + (my - H / 2) / cam.scale;
    } else {
      cam.dist /= f;
    }
    interacting = true; settle(); redraw();
  }, { passive: false });
  function hoverAt(ev) {
    var r = scene.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    if (mx < 0 || my < 0 || mx > W || my > H) return;
    // sx, sy hold the estimate drawn last, the one selected.
    var best = -1, bd = 64;
    var last = state.lms ? n : np; // hidden landmarks are not hovered
    for (var i = 0; i < last; i++) {
      if (!vis[i]) continue;
      var dx = sx[i] - mx, dy = sy[i] - my, d2 = dx * dx + dy * dy;
      if (d2 < bd) { bd = d2; best = i; }
    }
    if (best !== hover) { hover = best; drawOverlay(); showInfo(best); }
  }
  el('reset').addEventListener('click', function () { fit(); redraw(); });
  var VIEWS = { oblique: [-0.9, 0.55], top: [-Math.PI / 2, 1.5607], front: [-Math.PI / 2, 0], side: [0, 0] };
  Array.prototype.forEach.call(document.querySelectorAll('[data-view]'), function (b) {
    b.addEventListener('click', function () {
      var v = VIEWS[b.getAttribute('data-view')];
      cam.yaw = v[0]; cam.pitch = v[1]; redraw();
    });
  });
  el('ortho').addEventListener('change', function () { cam.ortho = el('ortho').checked; redraw(); });
  el('show-grid').addEventListener('change', function () { cam.grid = el('show-grid').checked; redraw(); });
  if (dim === 3) el('view3').hidden = false;
  el('hint').textContent = dim === 2 ? 'Drag to pan, wheel to zoom.' :
    'Drag to rotate, shift-drag (or right-drag) to pan, wheel to zoom.';

  // ---- convergence chart -------------------------------------------------------------------
  var chart = el('chart'), cover = el('chart-over'), cctx = chart.getContext('2d'), coctx = cover.getContext('2d');
  var CW = 0, CH = 0, panels = [], hist = null;
  var RANK_COLOURS = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00', '#444444'];
  function setupHistory() {
    if (!R || !R.history || R.history.f.length === 0) {
      el('conv-body').hidden = true;
      var none = el('conv-none'); none.hidden = false;
      none.textContent = R ? 'The report holds no history.' : 'No solve report: run “bcmsync view FILE.g2o” to solve, or pass --report REPORT.json.';
      el('conv').style.height = '64px';
      return;
    }
    var h = R.history, N = h.f.length;
    var fmin = Infinity;
    for (var k = 0; k < N; k++) fmin = Math.min(fmin, h.f[k]);
    var fref = fmin;
    var floor = 1e-12 * Math.max(1, Math.abs(fref));
    var gap = new Float64Array(N), iter = new Float64Array(N);
    for (var k2 = 0; k2 < N; k2++) {
      gap[k2] = Math.max(h.f[k2] - fref, floor);
      iter[k2] = k2;
    }
    var ranks = [];
    h.rank.forEach(function (r) { if (ranks.indexOf(r) < 0) ranks.push(r); });
    hist = { h: h, N: N, gap: gap, iter: iter, fref: fref, floor: floor, ranks: ranks };
    var lg = el('conv-legend');
    ranks.forEach(function (r, i) {
      var s = document.createElement('span'), sw = document.createElement('i');
      sw.style.background = RANK_COLOURS[i % RANK_COLOURS.length];
      s.appendChild(sw); s.appendChild(document.createTextNode('rank ' + r));
      var lv = (R.levels || []).filter(function (l) { return l.rank === r; })[0];
      if (lv) s.appendChild(document.createTextNode(lv.certified ? ' ✓' : ' ✗'));
      lg.appendChild(s);
    });
    var tip = document.createElement('span');
    tip.textContent = '● BCM sweep  ■ trust-region step  · F_ref = min F = ' + fmt(fref, 10);
    lg.appendChild(tip);
    Array.prototype.forEach.call(document.querySelectorAll('input[name=xaxis]'), function (r) {
      r.addEventListener('change', function () { state.xaxis = r.value; drawChart(); });
    });
  }
  function logTicks(lo, hi) {
    var out = [], step = Math.max(1, Math.ceil((hi - lo) / 5));
    for (var p = Math.ceil(lo); p <= hi; p += step) out.push(p);
    return out;
  }
  function drawChart() {
    if (!hist) return;
    var r = el('conv-body').getBoundingClientRect(), dp = window.devicePixelRatio || 1;
    CW = Math.max(100, r.width); CH = Math.max(60, r.height);
    [chart, cover].forEach(function (c) { c.width = Math.round(CW * dp); c.height = Math.round(CH * dp); });
    cctx.setTransform(dp, 0, 0, dp, 0, 0); coctx.setTransform(dp, 0, 0, dp, 0, 0);
    cctx.clearRect(0, 0, CW, CH);
    var h = hist.h, xs = state.xaxis === 'time' ? h.t : hist.iter;
    var xmin = Infinity, xmax = -Infinity;
    for (var k = 0; k < hist.N; k++) { xmin = Math.min(xmin, xs[k]); xmax = Math.max(xmax, xs[k]); }
    if (!(xmax > xmin)) xmax = xmin + 1;
    var gw = (CW - 30) / 2;
    var series = [
      { title: 'F − F_ref', ys: hist.gap },
      { title: 'relative gradient ‖grad F‖ / ‖2XQ‖', ys: h.rel }
    ];
    panels = series.map(function (s, p) {
      var x0 = 62 + p * (gw + 30), x1 = x0 + gw - 74, y0 = 16, y1 = CH - 30;
      var lo = Infinity, hi = -Infinity;
      for (var k = 0; k < hist.N; k++) if (s.ys[k] > 0) { var l = Math.log10(s.ys[k]); lo = Math.min(lo, l); hi = Math.max(hi, l); }
      if (!isFinite(lo)) { lo = -1; hi = 0; }
      lo = Math.floor(lo); hi = Math.ceil(hi); if (hi <= lo) hi = lo + 1;
      var P = { x0: x0, x1: x1, y0: y0, y1: y1, lo: lo, hi: hi, xmin: xmin, xmax: xmax, ys: s.ys, xs: xs };
      P.X = function (v) { return x0 + (x1 - x0) * (v - xmin) / (xmax - xmin); };
      P.Y = function (v) { return v > 0 ? y1 - (y1 - y0) * (Math.log10(v) - lo) / (hi - lo) : y1; };
      // Axes, grid and labels.
      cctx.strokeStyle = '#eceff3'; cctx.lineWidth = 1; cctx.beginPath();
      var yt = logTicks(lo, hi);
      yt.forEach(function (t) { var y = Math.round(P.Y(Math.pow(10, t))) + 0.5; cctx.moveTo(x0, y); cctx.lineTo(x1, y); });
      var xstep = niceStep((xmax - xmin) / 6), xt = [];
      if (state.xaxis === 'iter') xstep = Math.max(1, xstep);
      for (var x = Math.ceil(xmin / xstep) * xstep; x <= xmax + 1e-9 * xstep; x += xstep) xt.push(x);
      xt.forEach(function (t) { var X = Math.round(P.X(t)) + 0.5; cctx.moveTo(X, y0); cctx.lineTo(X, y1); });
      cctx.stroke();
      cctx.strokeStyle = '#9aa1ad'; cctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0, y1 - y0);
      cctx.fillStyle = '#677085'; cctx.font = '10.5px system-ui, sans-serif';
      cctx.textAlign = 'right'; cctx.textBaseline = 'middle';
      yt.forEach(function (t) { cctx.fillText('1e' + t, x0 - 4, P.Y(Math.pow(10, t))); });
      cctx.textAlign = 'center'; cctx.textBaseline = 'top';
      xt.forEach(function (t) { cctx.fillText(fmtTick(t), P.X(t), y1 + 3); });
      cctx.fillText(state.xaxis === 'time' ? 'time (s)' : 'iteration (BCM sweeps, then trust-region steps, per rank)', (x0 + x1) / 2, y1 + 15);
      cctx.textAlign = 'left'; cctx.textBaseline = 'bottom'; cctx.fillStyle = '#1d2430'; cctx.font = '600 11px system-ui, sans-serif';
      cctx.fillText(s.title, x0, y0 - 2);
      // Curves, one per rank, and markers per record.
      hist.ranks.forEach(function (rk, ri) {
        var col = RANK_COLOURS[ri % RANK_COLOURS.length];
        cctx.beginPath(); var started = false;
        for (var k = 0; k < hist.N; k++) {
          if (h.rank[k] !== rk || !(s.ys[k] > 0)) continue;
          var X = P.X(xs[k]), Y = P.Y(s.ys[k]);
          if (!started) { cctx.moveTo(X, Y); started = true; } else cctx.lineTo(X, Y);
        }
        cctx.strokeStyle = col; cctx.lineWidth = 1.6; cctx.stroke();
        cctx.fillStyle = col;
        var mk = hist.N > 400 ? 1.2 : 2.2;
        for (var k2 = 0; k2 < hist.N; k2++) {
          if (h.rank[k2] !== rk || !(s.ys[k2] > 0)) continue;
          var X2 = P.X(xs[k2]), Y2 = P.Y(s.ys[k2]);
          if (h.bcm[k2]) { cctx.beginPath(); cctx.arc(X2, Y2, mk, 0, 2 * Math.PI); cctx.fill(); } else cctx.fillRect(X2 - mk, Y2 - mk, 2 * mk, 2 * mk);
        }
      });
      return P;
    });
    drawChartCursor(-1);
  }
  function drawChartCursor(k) {
    coctx.clearRect(0, 0, CW, CH);
    if (k < 0 || !hist) return;
    var h = hist.h;
    panels.forEach(function (P) {
      var X = P.X(P.xs[k]);
      coctx.strokeStyle = 'rgba(29,36,48,0.35)'; coctx.lineWidth = 1;
      coctx.beginPath(); coctx.moveTo(X + 0.5, P.y0); coctx.lineTo(X + 0.5, P.y1); coctx.stroke();
      if (P.ys[k] > 0) { coctx.beginPath(); coctx.arc(X, P.Y(P.ys[k]), 4, 0, 2 * Math.PI); coctx.strokeStyle = '#1d2430'; coctx.stroke(); }
    });
    var txt = 'rank ' + h.rank[k] + ' ' + (h.bcm[k] ? 'BCM sweep' : 'RTR step') + ' ' + h.iter[k] + '   t = ' + fmt(h.t[k], 4) +
      ' s   F = ' + fmt(h.f[k], 12) + '   rel. grad ' + fmt(h.rel[k], 3);
    coctx.font = '11px ui-monospace, Menlo, Consolas, monospace';
    var w = coctx.measureText(txt).width + 12, x = Math.min(CW - w - 4, Math.max(4, panels[0].x1 - w / 2));
    coctx.fillStyle = 'rgba(255,255,255,0.92)'; coctx.fillRect(x, 0, w, 15);
    coctx.fillStyle = '#1d2430'; coctx.textBaseline = 'top'; coctx.fillText(txt, x + 6, 2);
  }
  el('conv-body').addEventListener('mousemove', function (ev) {
    if (!hist || !panels.length) return;
    var r = chart.getBoundingClientRect(), mx = ev.clientX - r.left;
    var P = panels[mx < panels[1].x0 - 15 ? 0 : 1];
    var best = -1, bd = Infinity;
    for (var k = 0; k < hist.N; k++) { var d = Math.abs(P.X(P.xs[k]) - mx); if (d < bd) { bd = d; best = k; } }
    drawChartCursor(bd < 30 ? best : -1);
  });
  el('conv-body').addEventListener('mouseleave', function () { drawChartCursor(-1); });

  // ---- options in the address ----------------------------------------------------------------
  // FILE.html#est=0&overlay=1&colour=plain&loops=0&observations=1&landmarks=0&poses=1&heads=1&view=top&ortho=1&x=time
  // (and, on a page with covariances, ellipses=1&ellipse-scale=100) opens
  // the page in that state, so a view can be shared or bookmarked.
  function applyHash() {
    var h = (location.hash || '').replace(/^#/, '');
    if (!h) return;
    h.split('&').forEach(function (kv) {
      var p = kv.split('='), key = decodeURIComponent(p[0]), val = decodeURIComponent(p[1] || '1');
      var on = val !== '0' && val !== 'false';
      switch (key) {
        case 'est': { var i = parseInt(val, 10); if (i >= 0 && i < ests.length) state.est = i; break; }
        case 'overlay': state.overlay = on && ests.length > 1; break;
        case 'colour': case 'color': if (val === 'plain' || val === 'cost') state.colour = val; break;
        case 'odometry': state.odom = on; break;
        case 'loops': state.loops = on && nLoops > 0; break;
        case 'observations': state.obs = on && nObs > 0; break;
        case 'landmarks': state.lms = on && nLm > 0; break;
        case 'poses': state.poses = on; break;
        case 'heads': state.heads = on; break;
        case 'view': if (VIEWS[val]) { cam.yaw = VIEWS[val][0]; cam.pitch = VIEWS[val][1]; } break;
        case 'ortho': cam.ortho = on; break;
        case 'grid': cam.grid = on; break;
        case 'x': if (val === 'time' || val === 'iter') state.xaxis = val; break;
        case 'ellipses': state.ell = on && !!ellAx; break;
        case 'ellipse-scale': { var f = +val; if (ELL_SCALES.indexOf(f) >= 0) { state.ellScale = f; state.ellScaleSet = true; } break; }
      }
    });
    // Make the controls agree.
    Array.prototype.forEach.call(document.querySelectorAll('input[name=est]'), function (r) {
      r.checked = state.overlay ? r.value === 'overlay' : r.value === String(state.est);
    });
    [['show-odom', 'odom'], ['show-loops', 'loops'], ['show-poses', 'poses'], ['show-heads', 'heads'],
      ['show-obs', 'obs'], ['show-lms', 'lms'], ['show-ell', 'ell']].forEach(function (c) {
      el(c[0]).checked = state[c[1]];
    });
    el('colour-cost').checked = state.colour === 'cost';
    el('colour-plain').checked = state.colour === 'plain';
    el('ortho').checked = cam.ortho; el('show-grid').checked = cam.grid;
    Array.prototype.forEach.call(document.querySelectorAll('input[name=xaxis]'), function (r) { r.checked = r.value === state.xaxis; });
  }

  // selfTest drives every control once with synthetic events and draws
  // after each, so a headless browser can check that interaction throws
  // nothing; #selftest in the address runs it after the first frame.
  function selfTest() {
    var r = scene.getBoundingClientRect(), cx = r.left + r.width / 2, cy = r.top + r.height / 2, steps = 0;
    function mouse(target, type, x, y, extra) {
      var init = { clientX: x, clientY: y, bubbles: true, cancelable: true, button: 0 };
      for (var k in extra || {}) init[k] = extra[k];
      target.dispatchEvent(type === 'wheel' ? new WheelEvent(type, init) : new MouseEvent(type, init));
    }
    function step(action) { action(); draw(); legend(); steps++; }
    step(function () { mouse(scene, 'mousedown', cx, cy); mouse(window, 'mousemove', cx + 40, cy + 25); mouse(window, 'mouseup', cx + 40, cy + 25); });
    step(function () { mouse(scene, 'mousedown', cx, cy, { shiftKey: true }); mouse(window, 'mousemove', cx - 30, cy + 10, { shiftKey: true }); mouse(window, 'mouseup', cx, cy); });
    step(function () { mouse(scene, 'wheel', cx, cy, { deltaY: -240 }); interacting = true; });
    var moving = root.getAttribute('data-draw-ms-moving');
    step(function () { interacting = false; mouse(window, 'mousemove', cx + 3, cy - 2); });
    Array.prototype.forEach.call(document.querySelectorAll('aside input, #conv input'), function (inp) {
      step(function () { inp.click(); });
      if (inp.type === 'checkbox') step(function () { inp.click(); });
    });
    Array.prototype.forEach.call(document.querySelectorAll('aside button'), function (b) { step(function () { b.click(); }); });
    if (ellAx) step(function () {
      var sel = el('ell-scale');
      sel.value = String(ELL_SCALES[Math.min(ELL_SCALES.length - 1, ELL_SCALES.indexOf(state.ellScale) + 1)]);
      sel.dispatchEvent(new Event('change'));
    });
    step(function () {
      var cr = el('conv-body').getBoundingClientRect();
      mouse(el('conv-body'), 'mousemove', cr.left + cr.width * 0.3, cr.top + cr.height / 2);
      mouse(el('conv-body'), 'mousemove', cr.left + cr.width * 0.8, cr.top + cr.height / 2);
    });
    step(function () { window.dispatchEvent(new Event('resize')); });
    // Hover over a landmark: the side bar names it, and the test reads
    // what it said from data-hover.
    if (nLm > 0) step(function () {
      if (!state.lms) { state.lms = true; draw(); }
      var rr = scene.getBoundingClientRect();
      for (var i = n - 1; i >= np; i--) {
        if (vis[i] && sx[i] > 0 && sy[i] > 0 && sx[i] < W && sy[i] < H) {
          mouse(window, 'mousemove', rr.left + sx[i], rr.top + sy[i]);
          root.setAttribute('data-hover', el('info').textContent.replace(/\n/g, ' | '));
          break;
        }
      }
    });
    // The last frame drawn while moving is the one just after the wheel.
    if (moving !== null) root.setAttribute('data-draw-ms-moving', moving);
    root.setAttribute('data-selftest', String(steps));
  }

  // ---- start ----------------------------------------------------------------------------------
  // The first frame is drawn synchronously, so a headless browser that
  // takes the DOM right after load sees the final status.
  applyHash();
  setupHistory();
  resize();
  fit();
  if (ellAx && !state.ellScaleSet) state.ellScale = autoEllScale();
  if (ellAx) el('ell-scale').value = String(state.ellScale);
  draw();
  legend();
  drawChart();
  showInfo(-1);
  window.addEventListener('resize', function () {
    resize();
    if (!userMoved) fit();
    drawChart(); redraw();
  });
  // Self-check: count painted (non-white) pixels on a coarse lattice.
  var painted = 0;
  try {
    var img = ctx.getImageData(0, 0, scene.width, scene.height).data, stepPx = 4 * 3;
    for (var q = 0; q < img.length; q += 4 * stepPx) {
      if (img[q] < 235 || img[q + 1] < 235 || img[q + 2] < 235) painted++;
    }
  } catch (err) {
    painted = -1; // a tainted canvas cannot be read: no verdict
  }
  root.setAttribute('data-painted', String(painted));
  if (/(^#|&)selftest(=1)?($|&)/.test(location.hash)) selfTest();
  if (!root.getAttribute('data-status').startsWith('error')) {
    root.setAttribute('data-status', painted === 0 && n > 1 ? 'error: nothing was drawn' : 'ok');
  }
})();
