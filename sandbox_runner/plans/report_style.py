"""The style sheet of report.html: inline, no fonts or images to fetch; it prints and stacks."""

REPORT_CSS = """
:root {
  --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --paper: #ffffff; --wash: #f6f8fa;
  --ok: #1a7f37; --ok-wash: #dafbe1; --warn: #9a6700; --warn-wash: #fff8c5;
  --bad: #cf222e; --bad-wash: #ffebe9; --accent: #0969da; --accent-wash: #ddf4ff;
  --shared: #fff1cc;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--wash); color: var(--ink);
  font: 15px/1.55 -apple-system, "Segoe UI", "Noto Sans", "DejaVu Sans", Helvetica, Arial,
    sans-serif;
}
main { max-width: 1680px; margin: 0 auto; padding: 24px 28px 48px; }
a { color: var(--accent); }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo,
  Consolas, monospace; font-size: 0.88em; }
h1 { font-size: 1.75rem; margin: 0 0 6px; line-height: 1.25; }
h2 { font-size: 1.3rem; margin: 0 0 12px; padding-bottom: 6px;
  border-bottom: 1px solid var(--line); }
section { background: var(--paper); border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 22px; margin: 18px 0; }
.headline { border-left: 8px solid var(--muted); }
.headline.ok { border-left-color: var(--ok); }
.headline.warn { border-left-color: var(--warn); }
.headline.bad { border-left-color: var(--bad); }
.facts { margin: 8px 0 0; color: var(--muted); display: grid; gap: 0 28px;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 460px), 1fr)); }
.facts div { margin: 2px 0; }
.facts b { color: var(--ink); font-weight: 600; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 999px; font-size: 0.82rem;
  font-weight: 600; border: 1px solid transparent; white-space: nowrap; vertical-align: 2px; }
.badge.ok { background: var(--ok-wash); color: var(--ok); border-color: #aceebb; }
.badge.warn { background: var(--warn-wash); color: var(--warn); border-color: #f0d886; }
.badge.bad { background: var(--bad-wash); color: var(--bad); border-color: #ffcecb; }
.badge.info { background: var(--accent-wash); color: var(--accent); border-color: #b6e3ff; }
.chips { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 12px; }
.chip { background: var(--wash); border: 1px solid var(--line); border-radius: 8px;
  padding: 6px 12px; }
.chip a { text-decoration: none; color: var(--ink); font-weight: 600; }
nav.toc { display: flex; flex-wrap: wrap; gap: 6px 16px; margin-top: 12px; font-size: 0.9rem; }
.requirements { white-space: pre-wrap; background: var(--wash); border-radius: 8px;
  padding: 10px 14px; margin: 0; max-height: 16em; overflow: auto; }
.recommended { border: 2px solid var(--accent); background: #fbfdff; }
.columns { display: grid; gap: 16px; align-items: start;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 380px), 1fr)); }
.plan { border: 1px solid var(--line); border-radius: 10px; background: var(--paper);
  min-width: 0; overflow-wrap: anywhere; }
.plan > header { padding: 12px 16px; border-bottom: 1px solid var(--line); background: var(--wash);
  border-radius: 10px 10px 0 0; }
.plan > header .name { font-size: 1.05rem; font-weight: 700; margin-right: 6px; }
.plan > header .title { margin: 4px 0 2px; font-weight: 600; }
.plan > header .meta { color: var(--muted); font-size: 0.85rem; }
.plan .body { padding: 4px 16px 12px; }
.plan .problems { margin: 10px 16px 0; padding: 8px 12px 8px 28px; background: var(--warn-wash);
  border-radius: 6px; font-size: 0.9rem; }
.body h3 { font-size: 1.2rem; } .body h4 { font-size: 1.05rem; margin: 18px 0 6px; }
.body h5, .body h6 { font-size: 0.95rem; }
.body pre { background: var(--wash); padding: 10px 12px; border-radius: 6px; overflow-x: auto; }
.body code { background: var(--wash); padding: 1px 4px; border-radius: 4px; }
.body pre code { background: none; padding: 0; }
.body blockquote { margin: 0; padding-left: 12px; border-left: 3px solid var(--line);
  color: var(--muted); }
.empty { color: var(--muted); font-style: italic; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.92rem; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 10px; text-align: left;
  vertical-align: top; }
th { background: var(--wash); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.mark { text-align: center; font-weight: 700; color: var(--ok); }
tr.shared td { background: var(--shared); }
tr.total td { font-weight: 700; border-top: 2px solid var(--line); }
.legend { color: var(--muted); font-size: 0.88rem; margin: 8px 0 0; }
.swatch { display: inline-block; width: 12px; height: 12px; background: var(--shared);
  border: 1px solid #e3c46a; vertical-align: -1px; margin-right: 4px; }
.cards { display: grid; gap: 12px;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 300px), 1fr)); }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
  background: var(--paper); }
.card h4 { margin: 0 0 6px; font-size: 0.98rem; }
.card ul { margin: 0; padding-left: 20px; }
h3.sub { font-size: 1.02rem; margin: 16px 0 8px; }
.compare { margin: 0 0 8px; }
.compare-row { display: grid; gap: 12px; align-items: stretch;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 320px), 1fr)); }
.cell { border: 1px solid var(--line); border-radius: 8px; background: var(--paper);
  min-width: 0; overflow-wrap: anywhere; }
.cell-head { padding: 6px 12px; background: var(--wash); border-bottom: 1px solid var(--line);
  border-radius: 8px 8px 0 0; font-weight: 700; }
.cell .body { padding: 2px 12px 8px; }
ul.files { padding-left: 20px; }
a.file code { color: var(--accent); }
details.full > summary { cursor: pointer; padding: 8px 16px; color: var(--accent); }
tr.validation.fixed td { background: var(--accent-wash); }
footer { color: var(--muted); font-size: 0.85rem; text-align: center; margin-top: 24px; }
@media (max-width: 640px) {
  main { padding: 12px; }
  section { padding: 14px; border-radius: 8px; }
  h1 { font-size: 1.35rem; }
}
@media print {
  body { background: #fff; font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  section { border: none; padding: 0; margin: 0 0 14pt; }
  .headline { border-left-width: 6px; padding-left: 10pt; }
  nav.toc { display: none; }
  .facts { display: block; }
  .requirements { max-height: none; overflow: visible; }
  .columns, .cards, .compare-row { display: block; }
  .cell { break-inside: avoid; margin-bottom: 8pt; }
  .plan { border: none; break-before: page; }
  .plan > header { border: 1px solid var(--line); border-radius: 0; }
  .card { break-inside: avoid; margin-bottom: 8pt; }
  tr { break-inside: avoid; }
  a { color: inherit; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""
"""Kept apart from report_html.py so that the page's structure reads on its own."""
