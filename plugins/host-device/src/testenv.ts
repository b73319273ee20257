/**
 * The test helper of host-device's crash tests, a plugin module: host-device that SIGKILLs itself right after the move step named in
 * CNIKIT_TEST_KILL_AT (no cleanup runs, the process's file descriptors close: what a kill or the OOM killer does).
 */
import { plugin } from './index.ts';
import { hooks } from './move.ts';

const at = process.env.CNIKIT_TEST_KILL_AT;
hooks.step = (name) => {
  if (name === at) process.kill(process.pid, 'SIGKILL');
};

export { plugin };
