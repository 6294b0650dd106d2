"""The figure checks the e2e ``Ui`` runs in the page (plotly's own geometry, page pixels)."""

# For each annotation and the legend: its bounding box on the page; for each trace: its points
# in page pixels (plotly's axis l2p + the plot area offset; lines sampled between vertices).
# Returns "annotation text ~ trace name" for every box that covers a point of a trace.
OVERLAP_JS = """
id => {
  const g = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!g || !g._fullLayout) return ['no figure'];
  const fl = g._fullLayout, root = g.getBoundingClientRect();
  const boxes = [];
  g.querySelectorAll('.annotation').forEach((a, i) => {
    const bg = a.querySelector('.bg') || a; const r = bg.getBoundingClientRect();
    if (r.width > 0) boxes.push({name: a.textContent.trim(), r});
  });
  const lg = g.querySelector('.legend .bg');
  if (lg) boxes.push({name: 'legend', r: lg.getBoundingClientRect()});
  const hits = [];
  g._fullData.forEach(tr => {
    if (tr.visible !== true || !tr.x || !tr.y || tr.type === 'heatmap' || tr.type === 'bar')
      return;
    if (tr.mode === 'text') return;
    const xa = fl[(tr.xaxis || 'x').replace('x', 'xaxis')];
    const ya = fl[(tr.yaxis || 'y').replace('y', 'yaxis')];
    if (!xa || !ya) return;
    const pts = [];
    for (let i = 0; i < tr.x.length; i++) {
      if (tr.x[i] === null || tr.y[i] === null) { pts.push(null); continue; }
      const px = xa.l2p(xa.d2l(tr.x[i])) + xa._offset + root.left;
      const py = ya.l2p(ya.d2l(tr.y[i])) + ya._offset + root.top;
      if (isFinite(px) && isFinite(py)) pts.push([px, py]); else pts.push(null);
    }
    const sample = [];
    for (let i = 0; i < pts.length; i++) {
      if (!pts[i]) continue; sample.push(pts[i]);
      if (i + 1 < pts.length && pts[i + 1] && (tr.mode || '').includes('lines'))
        for (let k = 1; k < 8; k++) sample.push([pts[i][0] + (pts[i+1][0]-pts[i][0]) * k / 8,
                                                 pts[i][1] + (pts[i+1][1]-pts[i][1]) * k / 8]);
    }
    for (const b of boxes) for (const [x, y] of sample)
      if (x > b.r.left + 1 && x < b.r.right - 1 && y > b.r.top + 1 && y < b.r.bottom - 1) {
        hits.push(b.name + ' ~ ' + (tr.name || 'trace')); break; }
  });
  return hits;
}
"""

# The text labels drawn on the data (``mode="text"`` traces): every pair of labels whose boxes
# cross, and every label over a marker (its box vs the marker's square, from plotly's axes and
# the marker size). Returns "label ~ label" / "label ~ trace name" per collision.
LABELS_JS = """
id => {
  const g = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!g || !g._fullLayout) return ['no figure'];
  const fl = g._fullLayout, root = g.getBoundingClientRect();
  const cross = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
                          a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const labels = [...g.querySelectorAll('.textpoint text')]
    .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
    .map(t => ({name: t.textContent.trim(), r: t.getBoundingClientRect()}));
  const out = [];
  labels.forEach((a, i) => labels.slice(i + 1).forEach(b => {
    if (cross(a.r, b.r)) out.push(a.name + ' ~ ' + b.name); }));
  g._fullData.forEach(tr => {
    if (tr.visible !== true || !tr.x || !(tr.mode || '').includes('markers')) return;
    const xa = fl[(tr.xaxis || 'x').replace('x', 'xaxis')];
    const ya = fl[(tr.yaxis || 'y').replace('y', 'yaxis')];
    const h = (tr.marker && typeof tr.marker.size === 'number' ? tr.marker.size : 6) / 2;
    for (let i = 0; i < tr.x.length; i++) {
      if (tr.x[i] === null || tr.y[i] === null) continue;
      const px = xa.l2p(xa.d2l(tr.x[i])) + xa._offset + root.left;
      const py = ya.l2p(ya.d2l(tr.y[i])) + ya._offset + root.top;
      const m = {left: px - h, right: px + h, top: py - h, bottom: py + h};
      labels.forEach(a => { if (cross(a.r, m)) out.push(a.name + ' ~ ' + (tr.name || 'marker')); });
    }
  });
  return out;
}
"""

# The drawn figure's text boxes, from the page: every title, axis title, tick label, legend and
# annotation inside the figure's canvas; no colour bar, annotation or legend over an axis title
# (or the figure title). Returns one line per problem.
LAYOUT_JS = """
id => {
  const g = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!g) return ['no figure'];
  const svg = g.querySelector('.main-svg').getBoundingClientRect();
  const box = el => el.getBoundingClientRect();
  const name = el => (el.textContent || el.getAttribute('class') || '').trim().slice(0, 40);
  const inside = r => r.left >= svg.left - 1 && r.right <= svg.right + 1 &&
                      r.top >= svg.top - 1 && r.bottom <= svg.bottom + 1;
  const cross = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
                          a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const titles = [...g.querySelectorAll('.g-gtitle text, [class$="title"] text')]
    .filter(t => t.textContent.trim() && box(t).width > 0);
  const texts = [...g.querySelectorAll('text')].filter(t => t.textContent.trim() &&
    box(t).width > 0 && getComputedStyle(t).visibility !== 'hidden' &&
    !t.closest('.hovertext, .hoverlayer, .textpoint'));
  const out = [];
  texts.forEach(t => { if (!inside(box(t))) out.push('outside the canvas: ' + name(t)); });
  const blocks = [...g.querySelectorAll('.colorbar, .annotation, .legend')]
    .filter(b => box(b).width > 0);
  blocks.forEach(b => titles.forEach(t => {
    if (!b.contains(t) && cross(box(b), box(t)))
      out.push(name(b) + ' over the title ' + name(t));
  }));
  return out;
}
"""
