/** bandwidth's kernel names: the reference's IFB device name, and the alias that marks an IFB as this network's. */
import { formatHashWithPrefix, nftNetworkHash } from '@cnikit/firewall';

/** The IFB device of a container: `bwp` + 12 hex of sha512(network + containerID), as the reference names it. */
export function ifbDeviceName(network: string, containerID: string): string {
  return formatHashWithPrefix(15, 'bwp', network + containerID);
}

/** The IFB's alias names its network (hashed: any name fits), so GC never touches another network's IFB. */
export function ownerAlias(network: string): string {
  return `cnikit-bandwidth:${nftNetworkHash(network)}`;
}
