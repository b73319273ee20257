/**
 * @cnikit/firewall/testing — test and benchmark seams: `execStats.count` counts every tool run (iptables-save,
 * iptables-restore, nft, tc, dbus-send) of this process, so a test can assert "one tool run per plugin call".
 */
export { execStats } from './exec.ts';
