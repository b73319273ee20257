/**
 * The kit's outputs: a human table, the JSON list ({id, status, detail, …} per check) and JUnit XML, and the shell
 * line that repeats a recorded call by hand.
 */
import type { CallRecord, CheckResult, Report } from './kit-types.ts';

const MAX_STDIN = 2048;

/** Quote for a POSIX shell (for the human to paste; the kit itself never runs a shell). */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** `printf '%s' STDIN | env -i VAR=… PLUGIN` — the call as a shell line (a long stdin is shortened and says so). */
export function reproLine(c: CallRecord): string {
  const long = c.stdin.length > MAX_STDIN;
  const stdin = long ? c.stdin.slice(0, 200) : c.stdin;
  const env = Object.entries(c.env)
    .map(([k, v]) => `${k}=${shellQuote(v)}`)
    .join(' ');
  const cmd = `printf '%s' ${shellQuote(stdin)} | env -i ${env} ${shellQuote(c.plugin)}`;
  return long ? `${cmd}\n  (stdin shortened: ${c.stdin.length} bytes in all, the first 200 shown)` : cmd;
}

/** A plugin's stdout for the report: JSON on one line when it is JSON. */
export function compactOut(stdout: string, max = 600): string {
  let t = stdout.trim();
  try {
    t = JSON.stringify(JSON.parse(t));
  } catch {
    // not JSON: as printed
  }
  if (!t) return '(empty)';
  return t.length > max ? `${t.slice(0, max)}… (${t.length} characters)` : t;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** The human report: one row per check, then every failure in full with how to reproduce it. */
export function formatTable(report: Report): string {
  const rows = report.results.map((r) => [
    r.id,
    r.status.toUpperCase(),
    r.spec,
    (r.detail.split('\n')[0] ?? '').slice(0, 100),
  ]);
  const head = ['CHECK', 'STATUS', 'SPEC (spec-v1.1.0)', 'DETAIL'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  w[2] = Math.min(w[2] ?? 0, 42);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : pad(c.slice(0, w[i]), w[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const out = [
    `cnikit conformance: ${report.plugin} (type ${report.type}, network ${report.network}, cniVersion ${report.cniVersion})`,
    `supported versions: ${report.supportedVersions.join(', ') || '(none)'}`,
    ...(report.suppliedRuntimeConfig?.length ? [suppliedText(report.suppliedRuntimeConfig)] : []),
    '',
    line(head),
    ...rows.map(line),
    '',
    `${report.counts.pass} passed, ${report.counts.fail} failed, ${report.counts.skip} skipped (${(report.durationMs / 1000).toFixed(1)} s)`,
  ];
  const fails = report.results.filter((r) => r.status === 'fail');
  for (const f of fails) {
    out.push('', `FAIL ${f.id} — ${f.title} (${f.spec})`, indent(f.detail));
    for (const c of f.repro ?? []) {
      out.push(
        '  reproduce:',
        indent(reproLine(c), 4),
        `  it answered: exit ${c.code}; stdout ${compactOut(c.stdout)}`,
      );
    }
  }
  return `${out.join('\n')}\n`;
}

function indent(s: string, n = 2): string {
  return s
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
}

/** The JSON output: a list of {id, status, detail, title, spec, durationMs, repro?}. */
export function formatJson(report: Report): string {
  return `${JSON.stringify(
    report.results.map((r) => ({
      id: r.id,
      status: r.status,
      detail: r.detail,
      title: r.title,
      spec: r.spec,
      durationMs: r.durationMs,
      ...(r.repro ? { repro: r.repro.map((c) => ({ env: c.env, stdin: c.stdin, plugin: c.plugin })) } : {}),
    })),
    null,
    2,
  )}\n`;
}

export function xmlEscape(s: string): string {
  // XML 1.0 allows only these control characters
  const clean = s.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD]/g, '?');
  return clean
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

function testcase(r: CheckResult, classname: string): string {
  const open = `    <testcase classname="${xmlEscape(classname)}" name="${xmlEscape(r.id)}" time="${(r.durationMs / 1000).toFixed(3)}"`;
  if (r.status === 'pass') return `${open}/>`;
  if (r.status === 'skip')
    return `${open}>\n      <skipped message="${xmlEscape(r.detail)}"/>\n    </testcase>`;
  const body = [
    r.detail,
    ...(r.repro ?? []).map(
      (c) => `reproduce: ${reproLine(c)}\nit answered: exit ${c.code}; stdout ${compactOut(c.stdout, 4000)}`,
    ),
  ].join('\n');
  return `${open}>\n      <failure message="${xmlEscape(`${r.title} (${r.spec})`)}" type="conformance">${xmlEscape(body)}</failure>\n    </testcase>`;
}

/** JUnit XML (one testsuite per plugin, one testcase per check). */
export function formatJunit(reports: readonly Report[]): string {
  const suites = reports.map((rep) => {
    const name = `cnikit conformance ${rep.type} (${rep.plugin})`;
    return [
      `  <testsuite name="${xmlEscape(name)}" tests="${rep.results.length}" failures="${rep.counts.fail}" errors="0" skipped="${rep.counts.skip}" time="${(rep.durationMs / 1000).toFixed(3)}">`,
      ...rep.results.map((r) => testcase(r, `conformance.${rep.type}`)),
      '  </testsuite>',
    ].join('\n');
  });
  const total = (k: 'pass' | 'fail' | 'skip') => reports.reduce((n, r) => n + r.counts[k], 0);
  const tests = reports.reduce((n, r) => n + r.results.length, 0);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="cnikit conformance" tests="${tests}" failures="${total('fail')}" errors="0" skipped="${total('skip')}">`,
    ...suites,
    '</testsuites>',
    '',
  ].join('\n');
}

/** One line naming the runtimeConfig the kit supplied for declared capabilities ('' when none). */
export function suppliedText(s: Report['suppliedRuntimeConfig']): string {
  if (!s.length) return '';
  return `runtimeConfig supplied by the kit for declared capabilities the list gives none for: ${s
    .map((x) => `${x.type} ${x.capability}=${JSON.stringify(x.value)}`)
    .join(', ')}`;
}
