/**
 * Reading a Prometheus text exposition in tests with the npm parser parse-prometheus-text-format, plus
 * what it lacks: it flattens a histogram family into one series (it follows client_python 0.0.19), so
 * `histogramSeries` hands it one series at a time, that series' own labels taken off.
 */
import assert from 'node:assert/strict';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

export interface MetricSample {
  labels?: Record<string, string>;
  value?: string;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}

export interface MetricFamily {
  name: string;
  help?: string;
  type: string;
  metrics: MetricSample[];
}

export function parseMetrics(text: string): MetricFamily[] {
  return parsePrometheusTextFormat(text) as MetricFamily[];
}

/** The family `name` (asserted to exist). */
export function metricFamily(text: string, name: string): MetricFamily {
  const f = parseMetrics(text).find((x) => x.name === name);
  assert.ok(f, `metric family ${name}`);
  return f;
}

/** The value of the family's sample whose labels include `labels` (0 when there is none). */
export function sampleValue(f: MetricFamily, labels: Record<string, string> = {}): number {
  const m = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  return m ? Number(m.value) : 0;
}

/** One series of histogram `name`: `labels` is its label text as exposed, e.g. `plugin="bridge",command="ADD"`. */
export function histogramSeries(text: string, name: string, labels: string): MetricSample {
  const own = text
    .split('\n')
    .filter(
      (l) => l.startsWith(`# HELP ${name} `) || l.startsWith(`# TYPE ${name} `) || l.includes(`{${labels}`),
    )
    .filter((l) => l.startsWith('#') || l.startsWith(`${name}_`))
    .map((l) => l.replace(`{${labels},`, '{').replace(`{${labels}}`, ''))
    .join('\n');
  const f = parseMetrics(`${own}\n`).find((x) => x.name === name);
  assert.ok(f?.metrics[0], `histogram ${name}{${labels}}`);
  return f.metrics[0];
}
