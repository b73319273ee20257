/** resolv.conf parsing with the reference's rules (`host-local/dns.go`). */
import { readFileSync } from 'node:fs';
import type { DNS } from '@cnikit/skel';
import { goFsError } from './store.ts';

/** Parse resolv.conf text: `nameserver`, `domain` (last wins), `search`, `options`; `#`/`;` comments. */
export function parseResolvConfText(text: string): DNS {
  const nameservers: string[] = [];
  const search: string[] = [];
  const options: string[] = [];
  let domain = '';
  // bufio.ScanLines: split on \n, drop one trailing \r (TrimSpace below removes it anyway)
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.length === 0 || line[0] === '#' || line[0] === ';') continue;
    const fields = line.split(/\s+/);
    if (fields.length < 2) continue;
    switch (fields[0]) {
      case 'nameserver':
        nameservers.push(fields[1]!);
        break;
      case 'domain':
        domain = fields[1]!;
        break;
      case 'search':
        search.push(...fields.slice(1));
        break;
      case 'options':
        options.push(...fields.slice(1));
        break;
    }
  }
  const dns: DNS = {};
  if (nameservers.length > 0) dns.nameservers = nameservers;
  if (domain !== '') dns.domain = domain;
  if (search.length > 0) dns.search = search;
  if (options.length > 0) dns.options = options;
  return dns;
}

/** Read and parse a resolv.conf; errors read like Go's (`open <path>: no such file or directory`). */
export function parseResolvConf(path: string): DNS {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw goFsError(code === 'EISDIR' ? 'read' : 'open', path, err);
  }
  return parseResolvConfText(text);
}
