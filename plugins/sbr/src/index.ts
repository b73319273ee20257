/**
 * sbr: source-based routing for a chained interface (reference: plugins/meta/sbr).
 *
 * - ADD (chained only): for each address of CNI_IFNAME in prevResult a rule `from <ip>/32 lookup <table>`. With
 *   `table` set, only the rules. Without it, each address gets the first free table from 100 on, a default route
 *   through its gateway (`gateways` override per family) and the interface's main-table routes; those routes then
 *   leave the main table (with `addSourceHints`, the subnet routes stay with a source hint). The work runs under
 *   an exclusive lock on the namespace file, like the reference. prevResult is passed through.
 *   A failed ADD undoes its rules and route moves (the reference leaves them).
 * - DEL: removes the rules whose source is an address of the interface (of `table` only, when set); a missing
 *   namespace or interface is success.
 * - CHECK: every address has its source rule and, without `table`, the default route through its gateway in the
 *   rule's table (SPEC.md §2 CHECK; the reference checks nothing).
 * - GC / STATUS: nothing is kept outside the container namespace: success.
 */
import { closeSync, openSync } from 'node:fs';
import { isNetnsGoneForDel, type Sync, withNetns } from '@cnikit/netlink';
import {
  CNIKIT_VERSION,
  CniError,
  ErrorCode,
  type Plugin,
  type Request,
  type Result,
  Rollback,
} from '@cnikit/skel';
import { flock } from '@cnikit/sys';
import { checkTable, ipConfigsFor, parseConf, type SbrConf, staticGateways } from './config.ts';
import { checkProblems, setupRoutes, setupWithTable, tidyRules } from './routing.ts';

/** The reference serialises sbr calls on the namespace file (go-filemutex: flock). */
function withLockAndNetns<T>(netns: string, fn: () => Sync<T>): T {
  let fd: number | undefined;
  try {
    fd = openSync(netns, 'r');
  } catch {
    return withNetns(netns, fn); // reports the missing or unusable namespace in @cnikit/netlink's terms
  }
  try {
    flock(fd, 'ex');
    return withNetns(netns, fn);
  } finally {
    closeSync(fd);
  }
}

function chained(req: Request<SbrConf>): Result {
  if (!req.prevResult) throw new CniError(ErrorCode.Internal, 'This plugin must be called as chained plugin');
  return req.prevResult;
}

function add(req: Request<SbrConf>): Result {
  const conf = req.conf;
  const prev = chained(req);
  checkTable(conf.table);
  const ipcs = ipConfigsFor(req.ifName, prev);
  withLockAndNetns(req.netns, () => {
    const undo = new Rollback();
    try {
      if (conf.table !== undefined) setupWithTable(ipcs, conf.table, undo);
      else setupRoutes(ipcs, req.ifName, staticGateways(conf.gateways), conf.addSourceHints, undo);
    } catch (err) {
      undo.undoAllSync(req.log);
      throw err;
    }
  });
  return prev;
}

function del(req: Request<SbrConf>): void {
  const conf = req.conf;
  if (!req.netns) return;
  try {
    withLockAndNetns(req.netns, () => tidyRules(req.ifName, conf.table));
  } catch (err) {
    if (isNetnsGoneForDel(err, req.netns)) return;
    throw err;
  }
}

function check(req: Request<SbrConf>): void {
  const conf = req.conf;
  if (!req.prevResult) return;
  const ipcs = ipConfigsFor(req.ifName, req.prevResult);
  const problems = withNetns(req.netns, () => checkProblems(ipcs, conf.table, staticGateways(conf.gateways)));
  if (problems.length) throw new CniError(ErrorCode.Internal, `sbr: ${problems.join('; ')} on ${req.ifName}`);
}

export const plugin: Plugin<SbrConf> = {
  name: 'sbr',
  ipam: false,
  about: `CNI sbr plugin cnikit ${CNIKIT_VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
  gc() {},
  status() {},
};
