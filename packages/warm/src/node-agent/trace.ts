/**
 * The node agent's spans (docs/observability.md): when the service's environment names an OTLP endpoint
 * (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT), every list of the Node objects and every
 * reconcile pass is the root of a trace of its own, exported through the service's batcher (never waited for).
 * Inside a pass, the kernel steps are child spans (`node-agent vxlan`, `node-agent routes`, `node-agent
 * masquerade`), and the masquerade step's `iptables-restore` is an `exec` span below it, as in a plugin call.
 */
import { type Attributes, type Recording, type Span, SpanKind, startRecording, withSpan } from '@cnikit/skel';

export interface AgentTracing {
  /** The OTLP/HTTP traces URL. */
  endpoint: string;
  /** Takes a finished recording (the service's TraceBatcher.add). */
  exporter: (rec: Recording) => void;
}

/**
 * Runs `fn` as the root span `name` of a new trace (kind `kind`), exports the recording when it is done; without
 * tracing it is just `fn()`. `fn` may set attributes on the span it gets.
 */
export function rootSpan<T>(
  tracing: AgentTracing | undefined,
  name: string,
  attributes: Attributes,
  kind: number,
  fn: (span?: Span) => T,
): T {
  if (!tracing) return fn();
  const span = startRecording(tracing.endpoint, name, attributes, kind);
  const done = (e?: unknown) => {
    span.end(e);
    try {
      tracing.exporter(span.recording);
    } catch {
      // the export never changes what the agent does
    }
  };
  let out: T;
  try {
    out = withSpan(span, () => fn(span));
  } catch (e) {
    done(e);
    throw e;
  }
  if (out instanceof Promise) {
    return out.then(
      (v) => {
        done();
        return v;
      },
      (e: unknown) => {
        done(e);
        throw e;
      },
    ) as T;
  }
  done();
  return out;
}

export const KIND = SpanKind;
