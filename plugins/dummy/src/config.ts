/** dummy network configuration: the generic CNI keys only (decoding errors as the reference words them). */
import { CniError, decode, ErrorCode, type Infer, s } from '@cnikit/skel';

export const dummySchema = s.object({
  cniVersion: s.string().default(''),
  name: s.string().default(''),
  type: s.string().default(''),
  ipam: s.object({ type: s.string().default('') }).optional(),
});

export interface DummyConf {
  cniVersion: string;
  name: string;
  /** '' when the config has no IPAM: ADD and CHECK refuse it like the reference. */
  ipamType: string;
}

export const IPAM_REQUIRED = 'dummy interface requires an IPAM configuration';

export function parseConf(raw: unknown): DummyConf {
  let c: Infer<typeof dummySchema>;
  try {
    c = decode(dummySchema, raw, 'config');
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(
      e.code === ErrorCode.Internal ? ErrorCode.DecodingFailure : e.code,
      `failed to parse network config: ${e.msg}`,
      e.details,
    );
  }
  return { cniVersion: c.cniVersion, name: c.name, ipamType: c.ipam?.type ?? '' };
}
