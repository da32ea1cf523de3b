/* report.js - the behaviour of `evictbench report`'s pages (copied into
 * results/report/): a sortable, filterable runs table, and each output's
 * retention view (tokens shaded by the share of (layer, KV head) caches that
 * still hold them at a step, a step control and a layer/head selector).
 * Plain DOM code, no libraries; the pages work from file://. */
(function () {
  'use strict';

  /* ---- tables: sorting (click a header, or #sort=COLUMN:asc|desc) and filtering ---- */

  function cellKey(td, type) {
    var v = td.getAttribute('data-v');
    if (v === null) v = td.textContent;
    if (type === 'num') {
      var x = parseFloat(v);
      return isNaN(x) ? -Infinity : x;
    }
    return v.toLowerCase();
  }

  function sortBy(table, col, dir) {
    var th = table.tHead.rows[0].cells[col];
    var type = th.getAttribute('data-type') || 'text';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a.cells[col], type), y = cellKey(b.cells[col], type);
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) {
      c.removeAttribute('aria-sort');
    });
    th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
  }

  function columnOf(table, name) {
    var cells = table.tHead.rows[0].cells;
    for (var i = 0; i < cells.length; i++)
      if (cells[i].getAttribute('data-col') === name) return i;
    return -1;
  }

  function setupTable(table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener('click', function () {
        sortBy(table, i, th.getAttribute('aria-sort') === 'ascending' ? -1 : 1);
      });
    });
  }

  function setupFilter(input) {
    var table = document.getElementById(input.getAttribute('data-table'));
    input.addEventListener('input', function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var text = r.textContent.toLowerCase();
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
        r.classList.toggle('hidden', !keep);
      });
    });
  }

  function sortFromHash() {
    var m = /sort=([A-Za-z0-9_]+):(asc|desc)/.exec(location.hash);
    var table = document.getElementById('runs-table');
    if (!m || !table) return;
    var col = columnOf(table, m[1]);
    if (col >= 0) sortBy(table, col, m[2] === 'asc' ? 1 : -1);
  }

  /* ---- retention views ---- */

  /* one head's steps: "value" or "value*count" per run, an empty value = never */
  function decodeHead(s) {
    var out = [];
    s.split(',').forEach(function (x) {
      var star = x.indexOf('*'), v = star < 0 ? x : x.slice(0, star);
      var n = star < 0 ? 1 : parseInt(x.slice(star + 1), 10);
      for (var i = 0; i < n; i++) out.push(v ? parseInt(v, 10) : 0);
    });
    return out;
  }

  function option(select, value, text) {
    var o = document.createElement('option');
    o.value = value;
    o.textContent = text;
    select.appendChild(o);
  }

  function RetentionView(art, data) {
    this.art = art;
    this.d = data;
    this.heads = data.steps.map(decodeHead);
    var steps = {};
    this.heads.forEach(function (h) { h.forEach(function (v) { if (v) steps[v] = 1; }); });
    this.steps = Object.keys(steps).map(Number).sort(function (a, b) { return a - b; });
    this.countEvicted();
    this.build();
    this.render();
  }

  RetentionView.prototype.countEvicted = function () {
    var d = this.d, slots = 0, gone = 0;
    for (var p = 0; p < d.n_positions; p++) {
      var all = true;
      for (var h = 0; h < this.heads.length; h++) {
        if (this.heads[h][p]) slots++;
        else all = false;
      }
      if (all) gone++;
    }
    this.art.querySelector('.n-evicted-tokens').textContent = String(gone);
    this.art.querySelector('.n-evicted-slots').textContent = String(slots);
  };

  RetentionView.prototype.build = function () {
    var self = this, d = this.d, art = this.art;
    this.slider = art.querySelector('input.step');
    this.slider.max = String(this.steps.length);
    this.slider.value = String(this.steps.length);
    this.layer = art.querySelector('select.layer');
    this.head = art.querySelector('select.head');
    option(this.layer, 'all', 'all layers');
    for (var l = 0; l < d.n_layer; l++) option(this.layer, String(l), 'layer ' + l);
    option(this.head, 'all', 'all KV heads');
    for (var k = 0; k < d.n_kv; k++) option(this.head, String(k), 'KV head ' + k);
    [this.slider, this.layer, this.head].forEach(function (el) {
      el.addEventListener('input', function () { self.render(); });
      el.addEventListener('change', function () { self.render(); });
    });
    this.cells = [];
    var prompt = art.querySelector('.prompt-cells');
    for (var p = 0; p < d.n_prompt; p++) {
      var c = document.createElement('span');
      prompt.appendChild(c);
      this.cells.push(c);
    }
    var box = art.querySelector('.tokens'), holder = box, sent = 0;
    var starts = {}, ends = {};
    d.sentences.forEach(function (s) { starts[s[0]] = 1; ends[s[1]] = 1; });
    d.tokens.forEach(function (text, i) {
      var pos = d.n_prompt + i;
      if (starts[pos]) {
        holder = document.createElement('span');
        holder.className = 'sent';
        holder.title = 'sentence ' + (sent++);
        box.appendChild(holder);
      }
      var t = document.createElement('span');
      t.className = 'tok';
      t.textContent = text;
      if (i === d.diverge) {
        t.classList.add('diverge');
        t.title = 'first difference from FullKV';
      }
      holder.appendChild(t);
      self.cells.push(t);
      if (ends[pos]) holder = box;
    });
  };

  RetentionView.prototype.render = function () {
    var d = this.d, idx = parseInt(this.slider.value, 10);
    var s = idx < this.steps.length ? this.steps[idx] : Infinity;
    var horizon = s === Infinity ? d.n_positions : Math.min(d.n_positions, d.n_prompt + s - 1);
    var sel = [], L = this.layer.value, K = this.head.value;
    for (var h = 0; h < this.heads.length; h++) {
      var l = Math.floor(h / d.n_kv), k = h % d.n_kv;
      if ((L === 'all' || +L === l) && (K === 'all' || +K === k)) sel.push(this.heads[h]);
    }
    var held = 0;
    for (var p = 0; p < this.cells.length; p++) {
      var el = this.cells[p], n = 0;
      if (p >= horizon) {
        el.style.backgroundColor = '';
        el.classList.add('future');
        el.classList.remove('gone');
        continue;
      }
      for (var j = 0; j < sel.length; j++) {
        var v = sel[j][p];
        if (v === 0 || v > s) n++;
      }
      var share = sel.length ? n / sel.length : 0;
      if (share > 0) held++;
      el.classList.remove('future');
      el.classList.toggle('gone', share === 0);
      el.style.backgroundColor = 'rgba(0, 114, 178, ' + (0.08 + 0.55 * share).toFixed(3) + ')';
      el.title = 'position ' + p + ': held by ' + n + ' of ' + sel.length + ' caches';
    }
    var label = s === Infinity ? 'end of generation' :
      'compression ' + (idx + 1) + ' of ' + this.steps.length + ' (after token ' + s + ')';
    this.art.querySelector('.step-label').textContent = label;
    this.art.querySelector('.n-held').textContent = String(held);
  };

  function setupOutputs() {
    Array.prototype.forEach.call(document.querySelectorAll('article.output[data-json]'),
      function (art) {
        var data = JSON.parse(document.getElementById(art.getAttribute('data-json')).textContent);
        new RetentionView(art, data);
      });
  }

  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), setupTable);
  Array.prototype.forEach.call(document.querySelectorAll('input.filter'), setupFilter);
  sortFromHash();
  setupOutputs();
  document.body.setAttribute('data-ready', '1');
})();
