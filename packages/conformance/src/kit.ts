/**
 * The checks, run in this process. Needs root and a private mount namespace in which /var/lib/cni is a private
 * directory (`cli.ts` and `runConformance` arrange both); every check runs in a fresh sandbox (private "host" and
 * "container" network namespaces from @cnikit/testing) whose host namespace this thread enters, so every plugin the
 * kit starts runs there, as on a node. The plugins before the plugin under test run through @cnikit/libcni's
 * CniConfig (exec'd from CNI_PATH, as a runtime would); the plugin under test is exec'd directly, so every call is
 * recorded with its exact environment and stdin for the report.
 */
import { CHECK_FNS } from './checks.ts';
import { Harness, type KitOptions } from './harness.ts';

export { errorObjectProblems } from './check-outcome.ts';
export { capabilitySamples, type KitOptions, SAMPLE_CAPABILITY_ARGS } from './harness.ts';
export type { CallRecord, CheckResult, Report, Status } from './kit-types.ts';

/** The conformance kit: the harness (harness.ts) with the check bodies (checks.ts). */
export class Kit extends Harness {
  constructor(opts: KitOptions) {
    super(opts, CHECK_FNS);
  }
}
