/** Standalone entry for development and tests (the shipped binary is the multicall build). */
import { runPlugin } from '@cnikit/skel';
import { plugin } from './index.ts';

await runPlugin(plugin);
