/**
 * Standalone entry for development and tests: `node --import tsx plugins/host-local/src/run.ts` behaves like
 * the host-local executable (the shipped binary is the multicall build of scripts/multicall.ts).
 */
import { runPlugin } from '@cnikit/skel';
import { plugin } from './index.ts';

await runPlugin(plugin);
