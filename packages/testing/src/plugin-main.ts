/**
 * Process entry of a `{ source }` target (cni.ts): runs the Plugin exported as CNIKIT_TEST_PLUGIN_EXPORT by the
 * module CNIKIT_TEST_PLUGIN_MODULE through skel's `runPlugin`, exactly as the executable would, from source
 * (node + tsx). With CNIKIT_TEST_BARRIER=`<count>:<dir>` it first waits until `count` processes have started (one
 * file each in `dir`), so that concurrent invocations really overlap.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type AnyPlugin, runPlugin } from '@cnikit/skel';
import { scaled } from './timescale.ts';

const modulePath = process.env.CNIKIT_TEST_PLUGIN_MODULE;
const exportName = process.env.CNIKIT_TEST_PLUGIN_EXPORT || 'plugin';
if (!modulePath) throw new Error('plugin-main: CNIKIT_TEST_PLUGIN_MODULE is not set');
const plugin = (await import(pathToFileURL(modulePath).href))[exportName] as AnyPlugin | undefined;
if (!plugin || typeof plugin !== 'object')
  throw new Error(`plugin-main: ${modulePath} has no export ${exportName}`);

const barrier = process.env.CNIKIT_TEST_BARRIER;
if (barrier) {
  const sep = barrier.indexOf(':');
  const count = Number(barrier.slice(0, sep));
  const dir = barrier.slice(sep + 1);
  writeFileSync(join(dir, `ready-${process.pid}`), '');
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + scaled(60_000);
  while (readdirSync(dir).filter((f) => f.startsWith('ready-')).length < count) {
    if (Date.now() > deadline)
      throw new Error(`plugin-main: barrier ${dir}: fewer than ${count} processes started`);
    Atomics.wait(cell, 0, 0, 1);
  }
}
// the plugin's own module is loaded before the barrier, so the processes overlap in the plugin's work itself
await runPlugin(plugin);
