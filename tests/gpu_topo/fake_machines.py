"""Recorded GPU machines for the live-discovery tests, and what hoccl must find on them.

STAND-INS: no GPU is on the machines the tests run on. Each machine below is described once, as its PCI tree
(sockets, host bridges, PCIe switches, GPUs, NICs) and its NVLinks; from that this module writes
- machine.xml: hwloc's view (replayed by hwloc through HWLOC_XMLFILE),
- driver.txt: what the fake CUDA driver and the fake NVML report (fake_machine.h),
- the expected answer, computed here independently of hoccl: the nvidia-smi link word between every GPU pair and
  GPU-NIC pair, and the best ring cost (brute force over every order).

Machines:
- nvswitch8: 8 GPUs, each with 18 NVLinks to the NVSwitches, each GPU on a PCIe switch with its own NIC (mlx5_i),
  four such pairs per socket, one host bridge per pair (as on DGX H100-class machines).
- pcie4x2: 4+4 GPUs over PCIe on two sockets, no NVLink. Socket 0: one host bridge, a top switch with two switches
  under it: A = {GPU0, GPU1, mlx5_0}, B = {GPU2, GPU3}. Socket 1: two host bridges: C = {GPU4, GPU5},
  D = {GPU6, GPU7, mlx5_1}.
GPUs are listed in PCI bus order, the order in which NVML (and CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID) number them.
"""
import itertools
import json

CLASSES = ['NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS']
NVML_LEVEL = {'PIX': 10, 'PXB': 20, 'PHB': 30, 'NODE': 40, 'SYS': 50}


def nvswitch8():
    sockets = []
    gpus = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
            '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
    for s in range(2):
        bridges = []
        for i in range(4 * s, 4 * s + 4):
            bus = int(gpus[i][5:7], 16)
            bridges.append({'switches': [{'bus': f'0000:{bus - 2:02x}:00.0', 'children': [
                {'gpu': gpus[i]}, {'nic': f'mlx5_{i}', 'bus': f'0000:{bus + 1:02x}:00.0', 'netdev': f'ibp{bus + 1}s0'}]}]})
        sockets.append(bridges)
    return {'sockets': sockets, 'gpus': gpus, 'nvswitch': 18, 'nvlinks': []}


def pcie4x2():
    g = ['0000:07:00.0', '0000:08:00.0', '0000:0f:00.0', '0000:10:00.0',
         '0000:87:00.0', '0000:88:00.0', '0000:c7:00.0', '0000:c8:00.0']
    sw_a = {'bus': '0000:05:00.0', 'children': [{'gpu': g[0]}, {'gpu': g[1]},
                                                 {'nic': 'mlx5_0', 'bus': '0000:09:00.0', 'netdev': 'ibp9s0'}]}
    sw_b = {'bus': '0000:0d:00.0', 'children': [{'gpu': g[2]}, {'gpu': g[3]}]}
    top = {'bus': '0000:03:00.0', 'children': [{'switch': sw_a}, {'switch': sw_b}]}
    sw_c = {'bus': '0000:85:00.0', 'children': [{'gpu': g[4]}, {'gpu': g[5]}]}
    sw_d = {'bus': '0000:c5:00.0', 'children': [{'gpu': g[6]}, {'gpu': g[7]},
                                                 {'nic': 'mlx5_1', 'bus': '0000:c9:00.0', 'netdev': 'ibp201s0'}]}
    return {'sockets': [[{'switches': [top]}], [{'switches': [sw_c]}, {'switches': [sw_d]}]],
            'gpus': g, 'nvswitch': 0, 'nvlinks': []}


MACHINES = {'nvswitch8': nvswitch8, 'pcie4x2': pcie4x2}


class Tree:
    """The machine's PCI tree: each device's chain of ancestors (switch ports, host bridge) and its socket."""

    def __init__(self, m):
        self.path = {}    # device key -> list of ancestors, nearest first, ending with ('hb', socket, index)
        self.socket = {}
        self.nics = []    # (name, bus)
        self.netdev = {}  # NIC name -> its network interface
        for s, bridges in enumerate(m['sockets']):
            for h, hb in enumerate(bridges):
                for sw in hb['switches']:
                    self._walk(sw, [('hb', s, h)], s)

    def _walk(self, sw, above, s):
        # A switch: an upstream port, and one downstream port per child.
        up = [('up', sw['bus'])] + above
        for k, child in enumerate(sw['children']):
            down = [('down', sw['bus'], k)] + up
            if 'switch' in child:
                self._walk(child['switch'], down, s)
            else:
                key = child.get('gpu') or child['nic']
                self.path[key] = down
                self.socket[key] = s
                if 'nic' in child:
                    self.nics.append((child['nic'], child['bus']))
                    self.netdev[child['nic']] = child['netdev']

    def link(self, a, b):
        pa, pb = self.path[a], self.path[b]
        for da, anc in enumerate(pa):
            if anc in pb:
                if anc[0] == 'hb':
                    return 'PHB'
                # da, db: hops from each device up to the common ancestor; one downstream port each = one switch.
                return 'PIX' if max(da, pb.index(anc)) <= 1 else 'PXB'
        return 'NODE' if self.socket[a] == self.socket[b] else 'SYS'


def expected(m):
    t = Tree(m)
    g = m['gpus']
    gpu_links = [[('X' if a == b else ('NV%d' % m['nvswitch'] if m['nvswitch'] else t.link(g[a], g[b])))
                  for b in range(len(g))] for a in range(len(g))]
    nic_links = [[t.link(g[a], name) for name, _ in t.nics] for a in range(len(g))]
    # Nearest NIC: best class, then the least used so far, then the lowest index (gpu_topology.h).
    users = [0] * len(t.nics)
    nic_of = []
    for a in range(len(g)):
        best = min(range(len(t.nics)), key=lambda k: (CLASSES.index(nic_links[a][k]), users[k], k))
        users[best] += 1
        nic_of.append(t.nics[best][0])
    return {'gpu_links': gpu_links, 'nic_links': nic_links, 'nics': [n for n, _ in t.nics], 'nic_of': nic_of,
            'netdev_of': [t.netdev[n] for n in nic_of], 'best_ring_cost': best_ring_cost(gpu_links)}


def hop_cost(word):
    if word.startswith('NV'):
        return 1.0 / (1 + int(word[2:]))
    return 64.0 ** (CLASSES.index(word) - 1)


def ring_cost(links, order):
    return sum(hop_cost(links[order[i]][order[(i + 1) % len(order)]]) for i in range(len(order)))


def best_ring_cost(links):
    n = len(links)
    return min(ring_cost(links, (0,) + p) for p in itertools.permutations(range(1, n)))


def write_driver(m, path):
    t = Tree(m)
    g = m['gpus']
    with open(path, 'w') as f:
        for bus in g:
            f.write(f'gpu {bus} 132\n')
        for a, b, n in m['nvlinks']:
            f.write(f'nvlink {a} {b} {n}\n')
        for i in range(len(g) if m['nvswitch'] else 0):
            for sw in range(4):  # links spread over four NVSwitches, as on the recorded machine
                f.write(f'nvswitch {i} {m["nvswitch"] // 4 + (1 if sw < m["nvswitch"] % 4 else 0)} 0000:f{sw}:00.0\n')
        for a in range(len(g)):
            for b in range(a + 1, len(g)):
                f.write(f'level {a} {b} {NVML_LEVEL[t.link(g[a], g[b])]}\n')


class Xml:
    def __init__(self):
        self.gp = 0
        self.lines = []

    def open(self, text):
        self.gp += 1
        self.lines.append(text.replace('GP', str(self.gp)))

    def close(self, text='</object>'):
        self.lines.append(text)


def write_xml(m, path):
    x = Xml()
    nsock = len(m['sockets'])
    full = hex((1 << nsock) - 1)
    x.open(f'<object type="Machine" os_index="0" cpuset="{full}" complete_cpuset="{full}" allowed_cpuset="{full}" '
           f'nodeset="{full}" complete_nodeset="{full}" allowed_nodeset="{full}" gp_index="GP">')
    bus_range = [0]

    def pci(bus, cls):
        return f'pci_busid="{bus}" pci_type="{cls} [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"'

    def switch(sw, depth):
        x.open(f'<object type="Bridge" gp_index="GP" bridge_type="1-1" depth="{depth}" '
               f'bridge_pci="0000:[00-ff]" {pci(sw["bus"], "0604")}>')
        for child in sw['children']:
            x.open(f'<object type="Bridge" gp_index="GP" bridge_type="1-1" depth="{depth + 1}" '
                   f'bridge_pci="0000:[00-ff]" {pci(sw["bus"][:-1] + "1", "0604")}>')
            if 'switch' in child:
                switch(child['switch'], depth + 2)
            elif 'gpu' in child:
                x.open(f'<object type="PCIDev" gp_index="GP" {pci(child["gpu"], "0302")}/>')
            else:
                x.open(f'<object type="PCIDev" gp_index="GP" {pci(child["bus"], "0207")}>')
                x.open(f'<object type="OSDev" gp_index="GP" name="{child["netdev"]}" osdev_type="2"/>')
                x.open(f'<object type="OSDev" gp_index="GP" name="{child["nic"]}" osdev_type="3"/>')
                x.close()
            x.close()
        x.close()

    for s, bridges in enumerate(m['sockets']):
        bit = hex(1 << s)
        sets = f'cpuset="{bit}" complete_cpuset="{bit}" nodeset="{bit}" complete_nodeset="{bit}"'
        x.open(f'<object type="Package" os_index="{s}" {sets} gp_index="GP">')
        x.open(f'<object type="NUMANode" os_index="{s}" {sets} gp_index="GP" local_memory="1073741824"/>')
        x.open(f'<object type="Core" os_index="{s}" {sets} gp_index="GP">')
        x.open(f'<object type="PU" os_index="{s}" {sets} gp_index="GP"/>')
        x.close()
        for hb in bridges:
            x.open('<object type="Bridge" gp_index="GP" bridge_type="0-1" depth="0" bridge_pci="0000:[00-ff]">')
            for sw in hb['switches']:
                switch(sw, 0)
            x.close()
        x.close()
    x.close()
    with open(path, 'w') as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
                '<topology version="2.0">\n' + '\n'.join(x.lines) + '\n</topology>\n')
