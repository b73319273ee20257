/**
 * @cnikit/firewall/testing — test and benchmark seams: `execStats.count` counts every tool run (iptables-save,
 * iptables-restore, nft, tc, dbus-send) of this process, so a test can assert "one tool run per plugin call";
 * `iptnftStats` counts the in-process iptables-nft writes, `nfDump` prints a namespace's nf_tables objects.
 */
export { execStats } from './exec.ts';
export { handlesDirForFile } from './handles-testing.ts';
/** How many restore scripts the in-process iptables-nft writer applied or declined (iptnft.ts). */
export { iptnftStats } from './iptnft.ts';
/** The ip/ip6 nf_tables objects of the calling thread's namespace, byte for byte (kernel-assigned parts left out). */
export { nfDump } from './nfdump.ts';
