/** install-cni --watch: the conflist kept in step with its template (inotify on the template's directory + a timer). */
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { type InstallCniOptions, installCni } from './install-cni-installer.ts';
import { renderConf } from './install-cni-template.ts';

/**
 * `--watch`: re-render on every change of the template's directory (a ConfigMap update swaps the `..data`
 * symlink there) and every `intervalMs`; rewrite the conflist when the rendering differs. Resolves when `signal`
 * aborts.
 */
export function watchTemplate(o: InstallCniOptions, intervalMs: number, signal: AbortSignal): Promise<void> {
  const template = o.template;
  if (template === undefined) return Promise.resolve();
  let lastError = '';
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const sync = () => {
    try {
      const conf = renderConf(o);
      if (!conf) return;
      const confPath = join(resolve(o.confDir), o.confName);
      let cur: Buffer | undefined;
      try {
        cur = readFileSync(confPath);
      } catch {
        cur = undefined;
      }
      lastError = '';
      if (cur?.equals(conf)) return;
      installCni({ ...o, dryRun: false });
    } catch (e) {
      const msg = `install-cni --watch: ${(e as Error).message} (the conflist on the node stays as it is)`;
      if (msg !== lastError) o.out(msg);
      lastError = msg;
    }
  };
  return new Promise((done) => {
    const schedule = () => {
      timer = setTimeout(() => {
        sync();
        schedule();
      }, intervalMs);
    };
    try {
      watcher = watch(dirname(template), { persistent: true }, () => {
        // several events arrive per swap: settle first
        if (timer) clearTimeout(timer);
        timer = setTimeout(() => {
          sync();
          schedule();
        }, 100);
      });
    } catch (e) {
      o.out(`install-cni --watch: cannot watch ${dirname(template)} (${(e as Error).message}); polling only`);
    }
    schedule();
    signal.addEventListener(
      'abort',
      () => {
        if (timer) clearTimeout(timer);
        watcher?.close();
        done();
      },
      { once: true },
    );
  });
}
