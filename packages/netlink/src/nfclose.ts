// Deferred closing of nfnetlink sockets (see closeAfterTask).
import type { NetlinkSocket } from '@cnikit/sys';

/**
 * Close an nfnetlink socket once the current task is done (setImmediate), not
 * now: the kernel frees the objects of an nf_tables transaction after an RCU grace period, and the first release of
 * an nfnetlink socket after a commit waits for that (milliseconds, tens of them on a loaded machine). A warm service
 * has answered its client by then; a process that exits first closes it at exit, as before. The close itself runs on
 * the native layer's background thread (closeInBackground): done on the main thread it made the warm service's next
 * call wait for that grace period (the call after a portmap DEL: 5–8 ms). That thread first waits for a grace period
 * itself: the release waits holding the namespace's nf_tables commit mutex, which every link creation or deletion
 * in that namespace takes too (the next bridge ADD's veth waited 1.5–2.5 ms for it). Only in the warm service
 * (the resident mark of @cnikit/warm, `Symbol.for('cnikit.resident')`): a cold plugin process exits right after its
 * call, and its exit would wait for the thread's grace period (a cold bridge or portmap ADD 5–11 ms longer).
 */
export function closeAfterTask(sock: NetlinkSocket): void {
  const grace = (globalThis as Record<symbol, unknown>)[RESIDENT] === true;
  // a synchronous loop over many objects keeps at most a few descriptors open
  if (deferred.length >= 16) {
    sock.closeInBackground(grace);
    return;
  }
  deferred.push(sock);
  if (deferred.length === 1)
    setImmediate(() => {
      for (const s of deferred.splice(0)) s.closeInBackground(grace);
    });
}
const RESIDENT = Symbol.for('cnikit.resident');
const deferred: NetlinkSocket[] = [];
