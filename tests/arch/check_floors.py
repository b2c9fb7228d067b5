#!/usr/bin/env python3
"""Checks the floors of the house (docs/architecture.md): every quoted #include of a library file must point to its
own floor or one below, a transport's folder includes no other transport's folder, and src/ names no concrete
transport. Exits 1 listing every violation (file:line, the include, and the rule it breaks).

Usage: check_floors.py [REPO_ROOT]"""
import pathlib
import re
import sys

# Each floor and the top-level folders its files may include (besides their own folder and the public header).
ALLOWED = {
    'base': ['base'],
    'kernels': ['base', 'kernels'],
    'topology': ['base', 'kernels', 'topology'],
    'transports': ['base', 'kernels', 'topology', 'transports'],
}
SOURCE = re.compile(r'\.(cc|h|cu|cuh|inc)$')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def violations(root):
    found = []
    for path in sorted(root.rglob('*')):
        rel = path.relative_to(root)
        if not path.is_file() or not SOURCE.search(path.name) or rel.parts[0] not in ('base', 'kernels', 'topology',
                                                                                     'transports', 'src'):
            continue
        for lineno, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            where = f'{rel}:{lineno}: #include "{inc}"'
            if '/' not in inc:
                if not (path.parent / inc).exists():
                    found.append(f'{where}: a bare name must be a file of the same folder')
                continue
            top = inc.split('/')[0]
            floor = rel.parts[0]
            if floor == 'src':
                parts = inc.split('/')
                if top == 'transports' and len(parts) > 2:
                    found.append(f'{where}: src/ may include only the transport interface (transports/*.h), '
                                 f'never a concrete transport')
                continue
            if top == 'hoccl':
                continue
            if top not in ALLOWED[floor]:
                found.append(f'{where}: {floor}/ may include only {", ".join(ALLOWED[floor])} (floors never point up)')
                continue
            if floor == 'transports' and top == 'transports':
                inc_parts = inc.split('/')
                own = rel.parts[1] if len(rel.parts) > 2 else None
                other = inc_parts[1] if len(inc_parts) > 2 else None
                if other and other != own and rel.name != 'registry.cc':
                    found.append(f'{where}: a transport folder includes only itself and the interface '
                                 f'(only transports/registry.cc lists the concrete transports)')
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.').resolve()
    found = violations(root)
    for v in found:
        print(v)
    print(f'{len(found)} include(s) break the floors' if found else 'floors: every include points down or sideways')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
