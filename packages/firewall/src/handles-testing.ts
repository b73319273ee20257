import { join } from 'node:path';
import { after, before } from 'node:test';

/**
 * node:test hooks of a test file: the rule-handle records (CNIKIT_NFT_HANDLES_DIR) go to `<dir()>/handles` from the
 * file's `before` to its `after` (`dir`: the file's own directory, e.g. sandboxForFile's `env.dir`, ready by then),
 * and the variable is set back afterwards.
 */
export function handlesDirForFile(dir: () => string): void {
  const saved = process.env.CNIKIT_NFT_HANDLES_DIR;
  before(() => {
    process.env.CNIKIT_NFT_HANDLES_DIR = join(dir(), 'handles');
  });
  after(() => {
    if (saved === undefined) delete process.env.CNIKIT_NFT_HANDLES_DIR;
    else process.env.CNIKIT_NFT_HANDLES_DIR = saved;
  });
}
