#!/usr/bin/env python3
"""Live GPU topology discovery and its use, on recorded machines replayed by STAND-INS (fake_machines.py): a fake
CUDA driver and a fake NVML found through LD_LIBRARY_PATH, hwloc fed the machine's PCI tree through HWLOC_XMLFILE.
No GPU is here; on a GPU machine the same code reads the real libraries (tools/gpu-check).

Checks, for each machine:
- `hoccl-topo --gpus live --json`: every GPU-GPU and GPU-NIC link word equals the one computed independently from
  the machine's tree; the ring costs what the brute force over every order finds; each GPU's NIC is the expected
  one; CUDA_VISIBLE_DEVICES=k places this process on GPU k with GPU k's NIC;
- the same with NVML's PCIe level unsupported (levels from hwloc's tree) and without NVML at all (PCIe only; no
  NVLinks known: a note says so);
- without a driver: an empty model, a plain INFO line, exit 0;
- applied: 4 ranks (hoccl-run), each on its own GPU through CUDA_VISIBLE_DEVICES: the host's ring follows the GPU
  ring (fewer slow hops than rank order), each rank reports its GPU's nearest NIC, and over tcp each rank's
  listener prefers that NIC's network interface.

Usage: test_gpu_live.py HOCCL_TOPO HOCCL_RUN FAKE_CUDA_DIR FAKE_NVML_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_machines  # noqa: E402

TOPO, RUN, CUDA_DIR, NVML_DIR = sys.argv[1:5]
failures = []
# meson puts the folders of the fakes on LD_LIBRARY_PATH itself; each case chooses its own.
FAKES = {os.path.realpath(CUDA_DIR), os.path.realpath(NVML_DIR)}
os.environ['LD_LIBRARY_PATH'] = ':'.join(
    d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d and os.path.realpath(d) not in FAKES)


def check(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL:', what)


def run(cmd, env_extra, libdirs, timeout=60):
    env = dict(os.environ)
    env.pop('CUDA_VISIBLE_DEVICES', None)
    env.pop('HOCCL_DEVICE', None)
    # The machines' PCI trees come from HWLOC_XMLFILE, read through hwloc's PCI component: the sanitizer run's
    # HWLOC_COMPONENTS=-pci (which avoids libpciaccess's leak on the real bus, tools/test) would hide every device.
    env.pop('HWLOC_COMPONENTS', None)
    env['LD_LIBRARY_PATH'] = ':'.join(libdirs + [env.get('LD_LIBRARY_PATH', '')])
    env.update(env_extra)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def live(env, libdirs):
    p = run([TOPO, '--gpus', 'live', '--json'], env, libdirs)
    if p.returncode != 0:
        check(False, f'hoccl-topo --gpus live failed ({p.returncode}): {p.stderr}')
        return None
    return json.loads(p.stdout)


def links_of(doc):
    g = len(doc['gpus'])
    return ([row[:g] for row in doc['links'][:g]], [row[g:] for row in doc['links'][:g]])


def hop_words(links, order):
    return sorted(links[order[i]][order[(i + 1) % len(order)]] for i in range(len(order)))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        empty_dir = os.path.join(tmp, 'nolibs')
        os.mkdir(empty_dir)
        for name, make in fake_machines.MACHINES.items():
            m = make()
            xml, drv = os.path.join(tmp, name + '.xml'), os.path.join(tmp, name + '.txt')
            fake_machines.write_xml(m, xml)
            fake_machines.write_driver(m, drv)
            want = fake_machines.expected(m)
            env = {'HWLOC_XMLFILE': xml, 'HOCCL_FAKE_GPU_MACHINE': drv}
            both = [CUDA_DIR, NVML_DIR]

            for variant, extra, dirs in [('cuda+nvml', {}, both),
                                         ('nvml without levels', {'HOCCL_FAKE_NVML_NO_ANCESTOR': '1'}, both),
                                         ('cuda only', {}, [CUDA_DIR])]:
                doc = live({**env, **extra}, dirs)
                if doc is None:
                    continue
                tag = f'{name} ({variant})'
                gl, nl = links_of(doc)
                want_gl = want['gpu_links']
                if variant == 'cuda only' and m['nvswitch']:  # no NVML: NVLinks unknown, the PCIe classes remain
                    t = fake_machines.Tree(m)
                    want_gl = [['X' if a == b else t.link(m['gpus'][a], m['gpus'][b]) for b in range(len(m['gpus']))]
                               for a in range(len(m['gpus']))]
                    check(any('NVML' in n for n in doc['notes']), f'{tag}: no note that NVML is missing: {doc["notes"]}')
                check(len(doc['gpus']) == len(m['gpus']), f'{tag}: {len(doc["gpus"])} GPUs found')
                check(gl == want_gl, f'{tag}: GPU links\n  got  {gl}\n  want {want_gl}')
                check([n['name'] for n in doc['nics']] == want['nics'], f'{tag}: NICs {doc["nics"]}')
                check(nl == want['nic_links'], f'{tag}: GPU-NIC links\n  got  {nl}\n  want {want["nic_links"]}')
                check(doc['nic_of'] == want['nic_of'], f'{tag}: NIC per GPU {doc["nic_of"]} != {want["nic_of"]}')
                best = fake_machines.best_ring_cost(want_gl)
                cost = fake_machines.ring_cost(want_gl, doc['ring'])
                check(sorted(doc['ring']) == list(range(len(m['gpus']))) and abs(cost - best) <= 1e-9 * best,
                      f'{tag}: ring {doc["ring"]} costs {cost}, the best ring {best}')
                real = want['gpu_links']  # what the machine has, whatever this variant could learn of it
                check(doc.get('peer_access') is not None and all(
                    doc['peer_access'][a][b] == (1 if a == b or real[a][b].startswith('NV') or real[a][b] != 'SYS' else 0)
                    for a in range(len(gl)) for b in range(len(gl))), f'{tag}: peer access {doc.get("peer_access")}')

            doc = live({**env, 'CUDA_VISIBLE_DEVICES': '5'}, both)
            if doc:
                me = doc.get('this_process', {})
                check(me.get('gpu') == 5 and me.get('nic') == want['nic_of'][5] and
                      me.get('ring_position') == doc['ring'].index(5),
                      f'{name}: CUDA_VISIBLE_DEVICES=5 placed as {me}')
            p = run([TOPO, '--gpus', 'live'], env, both)
            check(p.returncode == 0 and 'ring order:' in p.stdout and 'NIC per GPU:' in p.stdout,
                  f'{name}: text output\n{p.stdout}{p.stderr}')

            # Applied: 4 ranks on 4 GPUs chosen so that rank order is a bad ring.
            gpus_of_rank = [0, 4, 1, 5] if name == 'pcie4x2' else [3, 1, 7, 5]
            pick = ' '.join(map(str, gpus_of_rank))
            cmd = [RUN, '-n', '4', '--timeout', '60', '--', 'sh', '-c',
                   f'set -- {pick}; shift $HOCCL_LOCAL_RANK; CUDA_VISIBLE_DEVICES=$1 exec "$0" --online --json', TOPO]
            # Over tcp (shm off), so that each rank's listener shows the interface it prefers.
            p = run(cmd, {**env, 'HOCCL_DEBUG': 'INFO', 'HOCCL_SHM_DISABLE': '1'}, both, timeout=90)
            check(p.returncode == 0, f'{name}: 4 ranks on GPUs failed ({p.returncode}):\n{p.stderr[-3000:]}')
            if p.returncode == 0:
                start = p.stdout.index('{')
                job = json.JSONDecoder().raw_decode(p.stdout[start:])[0]
                ring = job['levels'][0]['rings'][0]
                gl = want['gpu_links']
                full = live(env, both)['ring']
                want_ring = sorted(range(4), key=lambda r: full.index(gpus_of_rank[r]))
                # The same ring up to rotation.
                k = ring.index(want_ring[0])
                check(ring[k:] + ring[:k] == want_ring, f'{name}: host ring over ranks {ring}, want {want_ring}')
                got = hop_words(gl, [gpus_of_rank[r] for r in ring])
                naive = hop_words(gl, gpus_of_rank)
                print(f'{name}: ranks on GPUs {gpus_of_rank}: host ring {ring}, hops {got} (rank order: {naive})')
                if name == 'pcie4x2':
                    check(got == ['PIX', 'PIX', 'SYS', 'SYS'] and naive == ['SYS'] * 4, f'{name}: hops {got}')
                for r, g in enumerate(gpus_of_rank):
                    line = f'is GPU{g} ('
                    nic = f'nearest NIC {want["nic_of"][g]}'
                    check(any(line in l and nic in l for l in p.stderr.splitlines()),
                          f'{name}: rank {r} did not report GPU{g} with {nic}')
                    # tcp binds to that NIC's network interface (when this machine has it; the recorded names are
                    # not here, so the address falls back, but the preference is logged). The last rank listens
                    # for nobody (it connects to every peer below it).
                    listens = f'tcp: rank {r} listens on'
                    pref = f'preferred interface: {want["netdev_of"][g]}, the nearest NIC of this rank\'s GPU'
                    if r < 3:
                        check(any(listens in l and pref in l for l in p.stderr.splitlines()),
                              f'{name}: rank {r} on GPU{g} did not prefer {want["netdev_of"][g]} for tcp')

        # No driver, no NVML: an empty model and a plain INFO line (skipped where a real driver is installed).
        probe = run([sys.executable, '-c', 'import ctypes; ctypes.CDLL("libcuda.so.1")'], {}, [empty_dir])
        if probe.returncode == 0:
            print('a real libcuda.so.1 is installed: the no-driver case is not checked here')
        else:
            p = run([TOPO, '--gpus', 'live'], {}, [empty_dir])
            check(p.returncode == 0 and 'INFO: no GPU found' in p.stdout, f'no driver: {p.returncode} {p.stdout}')
            doc = live({}, [empty_dir])
            check(doc is not None and doc['gpus'] == [] and doc['ring'] == [], f'no driver: {doc}')
    print('FAILED: %d check(s)' % len(failures) if failures else 'gpu topology live: all checks passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
