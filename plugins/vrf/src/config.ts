/**
 * vrf configuration (reference: plugins/meta/vrf main.go VRFNetConf): `vrfname` (required) and `table`. Pure.
 */
import { CniError, decode, ErrorCode, type Infer, interfaceNameProblem, s } from '@cnikit/skel';

const confSchema = s.object({
  vrfname: s.string().default(''),
  table: s.uint({ max: 0xffffffff }).default(0),
});

export type VrfConf = Infer<typeof confSchema>;

/** The reference's parseConf: `failed to load netconf: …`, then the vrf name check. */
export function parseConf(config: Record<string, unknown>): VrfConf {
  let conf: VrfConf;
  try {
    conf = decode(confSchema, config);
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(e.code, `failed to load netconf: ${e.msg}`, e.details, { cause: err });
  }
  if (conf.vrfname === '')
    throw new CniError(ErrorCode.Internal, 'configuration is expected to have a valid vrf name');
  // beyond the reference, which finds out from the kernel after its work began ("numerical result out of range")
  const problem = interfaceNameProblem(conf.vrfname);
  if (problem)
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid vrfname "${conf.vrfname}": the name ${problem}`,
    );
  return conf;
}

/** The first table id from 1 on that no VRF of the namespace uses (the reference's findFreeRoutingTableID). */
export function freeTable(taken: ReadonlySet<number>): number {
  let t = 1;
  while (taken.has(t)) t++;
  return t;
}
