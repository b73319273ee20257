/** Types of the npm package parse-prometheus-text-format (it ships none), as the observability test uses it. */
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
