/**
 * Example plugin on @cnikit/skel: records every invocation it receives and passes `prevResult` through.
 *
 * Config keys (besides the usual cniVersion/name/type):
 * - `recordFile` (string, optional): append one JSON line per invocation
 *   `{command, containerId, netns, ifName, args, path, cniVersion, stdin, prevResult, validAttachments, env}`;
 * - `result` (object, optional): returned from ADD when there is no prevResult (any spec version's shape);
 * - `fail` ({code, msg, details?}, optional): fail every command with this CNI error.
 *
 * Run it as a process: `node --conditions=cnikit-source --import tsx packages/skel/examples/passthrough.ts` (env + stdin as CNI).
 */
import { appendFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  CniError,
  decode,
  type Infer,
  type Plugin,
  parseResult,
  type Request,
  type Result,
  runPlugin,
  s,
  toCurrent,
} from '@cnikit/skel';

const Conf = s.object({
  recordFile: s.string().optional(),
  result: s.any(),
  fail: s.object({ code: s.uint(), msg: s.string(), details: s.string().default('') }).optional(),
});
export type PassthroughConf = Infer<typeof Conf>;

function record(req: Request): PassthroughConf {
  const conf = decode(Conf, req.config);
  if (conf.recordFile) {
    const line = {
      command: req.command,
      containerId: req.containerId,
      netns: req.netns,
      ifName: req.ifName,
      args: req.args,
      path: req.path,
      cniVersion: req.cniVersion,
      stdin: new TextDecoder().decode(req.stdin),
      prevResult: req.prevResult ?? null,
      validAttachments: req.validAttachments ?? null,
      env: Object.fromEntries(Object.entries(req.env).filter(([k]) => k.startsWith('CNI_'))),
    };
    appendFileSync(conf.recordFile, `${JSON.stringify(line)}\n`);
  }
  if (conf.fail) throw new CniError(conf.fail.code, conf.fail.msg, conf.fail.details);
  return conf;
}

export const plugin: Plugin = {
  name: 'passthrough',
  about: 'cnikit passthrough example plugin',
  add(req): Result {
    const conf = record(req);
    if (req.prevResult) return req.prevResult;
    if (conf.result !== undefined) return toCurrent(parseResult(conf.result));
    return { cniVersion: req.cniVersion };
  },
  del: (req) => void record(req),
  check: (req) => void record(req),
  gc: (req) => void record(req),
  status: (req) => void record(req),
};

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(self)) {
  await runPlugin(plugin);
}
