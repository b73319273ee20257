/** A conflist template or node lookup that cannot be installed (install-cni.ts, node-podcidr.ts): nothing was written. */
export class InstallCniError extends Error {}
