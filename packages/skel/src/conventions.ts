/**
 * Schemas for the CONVENTIONS.md capability arguments (`runtimeConfig`), `args.cni` and the GC
 * attachment list, so plugins can decode them with validation and get the types from types.ts.
 *
 * ```ts
 * const rc = decode(RuntimeConfigSchema, req.config.runtimeConfig, 'runtimeConfig');
 * rc.portMappings?.[0]?.hostPort; // number
 * ```
 */
import { type Infer, lazy, s } from './schema.ts';
import type {
  Attachment,
  BandwidthEntry,
  CniArgsConvention,
  DNS,
  IPRange,
  PortMapping,
  RuntimeConfig,
} from './types.ts';

export const DNSSchema = lazy('object', () =>
  s.object({
    nameservers: s.array(s.string()).optional(),
    domain: s.string().optional(),
    search: s.array(s.string()).optional(),
    options: s.array(s.string()).optional(),
  }),
);

export const PortMappingSchema = lazy('object', () =>
  s.object({
    hostPort: s.int().default(0),
    containerPort: s.int().default(0),
    protocol: s.string().optional(),
    hostIP: s.string().optional(),
  }),
);

export const IPRangeSchema = lazy('object', () =>
  s.object({
    subnet: s.string().default(''),
    rangeStart: s.string().optional(),
    rangeEnd: s.string().optional(),
    gateway: s.string().optional(),
  }),
);

export const BandwidthSchema = lazy('object', () =>
  s.object({
    ingressRate: s.uint().optional(),
    ingressBurst: s.uint().optional(),
    egressRate: s.uint().optional(),
    egressBurst: s.uint().optional(),
  }),
);

/** `runtimeConfig`: every well-known capability; other keys are kept as they are; missing → `{}`. */
export const RuntimeConfigSchema = lazy('object', () =>
  s
    .object({
      portMappings: s.array(PortMappingSchema).optional(),
      ipRanges: s.array(s.array(IPRangeSchema)).optional(),
      bandwidth: BandwidthSchema.optional(),
      dns: DNSSchema.optional(),
      ips: s.array(s.string()).optional(),
      mac: s.string().optional(),
      infinibandGUID: s.string().optional(),
      deviceID: s.string().optional(),
      aliases: s.array(s.string()).optional(),
      cgroupPath: s.string().optional(),
    })
    .passthrough()
    .default({}),
);

/** `args.cni` conventions (`ips`, `labels`, `mac`). */
export const ArgsCniSchema = lazy('object', () =>
  s
    .object({
      ips: s.array(s.string()).optional(),
      labels: s.array(s.object({ key: s.string().default(''), value: s.string().default('') })).optional(),
      mac: s.string().optional(),
    })
    .passthrough(),
);

/** GC's `cni.dev/valid-attachments` entries. */
export const AttachmentSchema = lazy('object', () =>
  s.object({
    containerID: s.string().default(''),
    ifname: s.string().default(''),
  }),
);

// Compile-time agreement with the spec types in types.ts.
type Assert<T extends true> = T;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type _ConventionChecks = [
  Assert<Same<Infer<typeof PortMappingSchema>, PortMapping>>,
  Assert<Same<Infer<typeof IPRangeSchema>, IPRange>>,
  Assert<Same<Infer<typeof BandwidthSchema>, BandwidthEntry>>,
  Assert<Same<Infer<typeof DNSSchema>, DNS>>,
  Assert<Same<Infer<typeof AttachmentSchema>, Attachment>>,
  Assert<Infer<typeof RuntimeConfigSchema> extends RuntimeConfig ? true : false>,
  Assert<Infer<typeof ArgsCniSchema> extends CniArgsConvention ? true : false>,
];
