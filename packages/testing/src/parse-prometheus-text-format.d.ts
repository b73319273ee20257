/** Types of the npm package parse-prometheus-text-format (it ships none), as @cnikit/testing/prometheus uses it. */
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
