"""tools/nccl/hoccl-nccl, without touching the project's venv:
1. status / install / restore on a throwaway tree laid out like a venv (lib/python3.X/site-packages/nvidia/nccl/lib
   and nvidia/cu13/lib): install links every libnccl.so.2 to the shim and keeps NVIDIA's file as .nvidia, restore puts
   it back byte for byte, both are idempotent, a state the tool did not make (a file over the link, as a pip
   reinstall leaves it) is refused with nothing changed, and a tree without the wheel is exit 2;
2. with torch in the venv (tools/install-deps --torch; skipped otherwise):
   - `hoccl-nccl run -- python ...`: torch's run-time NCCL version (ProcessGroupNCCL.get_runtime_nccl_version, which
     calls ncclGetVersion) is the shim's 2.32.3;
   - install into a throwaway site-packages that holds only nvidia/nccl/lib/libnccl.so.2 (a link to the venv's
     NVIDIA file), put first on PYTHONPATH so that torch loads the NCCL library from there (torch preloads it from
     the first sys.path entry that has one): no LD_PRELOAD, torch runs on the shim; after restore, on NVIDIA's again.
Usage: hoccl_nccl_tool.py TOOL SHIM VENV
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

tool, shim, venv = sys.argv[1:4]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def hn(*args, env=None):
    p = subprocess.run([sys.executable, tool, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=300)
    return p.returncode, p.stdout


def make_tree(root, files):
    site = os.path.join(root, "lib", "python3.11", "site-packages")
    out = []
    for rel, content in files:
        f = os.path.join(site, rel)
        os.makedirs(os.path.dirname(f), exist_ok=True)
        if isinstance(content, bytes):
            open(f, "wb").write(content)
        else:
            os.symlink(content, f)
        out.append(f)
    return site, out


def layout_checks(tmp):
    root = os.path.join(tmp, "fakevenv")
    _, files = make_tree(root, [("nvidia/nccl/lib/libnccl.so.2", b"nvidia nccl 12"),
                                ("nvidia/cu13/lib/libnccl.so.2", b"nvidia nccl 13")])
    originals = {f: open(f, "rb").read() for f in files}
    rc, out = hn("status", "--venv", root)
    check(rc == 0 and out.count("NVIDIA's library") == 2, f"status before install: {out.strip()}")
    rc, out = hn("install", "--venv", root, "--shim", shim)
    check(rc == 0, f"install: rc {rc}: {out.strip()}")
    for f in files:
        check(os.path.islink(f) and os.path.realpath(f) == os.path.realpath(shim), f"{f} links to the shim")
        check(open(f + ".nvidia", "rb").read() == originals[f], f"{f}.nvidia holds NVIDIA's bytes")
    rc, out = hn("status", "--venv", root)
    check(rc == 0 and out.count(": hoccl (link to") == 2, f"status after install: {out.strip()}")
    rc, out = hn("install", "--venv", root, "--shim", shim)
    check(rc == 0 and out.count("already hoccl's") == 2, f"install again does nothing: {out.strip()}")
    rc, out = hn("restore", "--venv", root)
    check(rc == 0, f"restore: rc {rc}: {out.strip()}")
    for f in files:
        check(not os.path.islink(f) and open(f, "rb").read() == originals[f], f"{f} is NVIDIA's file again")
        check(not os.path.lexists(f + ".nvidia"), f"{f}.nvidia is gone")
    rc, out = hn("restore", "--venv", root)
    check(rc == 0 and out.count("already NVIDIA's") == 2, f"restore again does nothing: {out.strip()}")
    # pip reinstalled the wheel over the link: the tool refuses both ways and changes nothing.
    rc, _ = hn("install", "--venv", root, "--shim", shim)
    os.unlink(files[0])
    open(files[0], "wb").write(b"reinstalled")
    before = sorted(os.listdir(os.path.dirname(files[0])))
    for action in (["install", "--shim", shim], ["restore"]):
        rc, out = hn(action[0], "--venv", root, *action[1:])
        check(rc == 1 and "pip reinstall" in out and "nothing changed" in out,
              f"{action[0]} over a state it did not make: rc {rc}: {out.strip()}")
    check(sorted(os.listdir(os.path.dirname(files[0]))) == before and
          open(files[0], "rb").read() == b"reinstalled" and os.path.islink(files[1]), "nothing was changed")
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "lib", "python3.11", "site-packages"))
    rc, out = hn("status", "--venv", empty)
    check(rc == 2 and "no NCCL wheel library" in out, f"a venv without the wheel: rc {rc}: {out.strip()}")
    rc, out = hn("run", "--shim", shim)
    check(rc == 2 and "needs a command" in out, f"run without a command: rc {rc}: {out.strip()}")


PROBE = ("import torch\n"
         "from torch._C._distributed_c10d import ProcessGroupNCCL\n"
         "print('runtime', tuple(ProcessGroupNCCL.get_runtime_nccl_version()), 'built', torch.cuda.nccl.version())\n")


def torch_runtime(cmd, env):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("runtime ")]
    print("     " + (line[-1] if line else p.stdout.strip()[-400:]))
    return line[-1].split(" built ")[0][len("runtime "):] if p.returncode == 0 and line else None


def torch_checks(tmp):
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    has_torch = os.path.exists(python) and subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"]).returncode == 0
    sites = sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")))
    nvidia = next((os.path.join(s, "nvidia", "nccl", "lib", "libnccl.so.2") for s in sites
                   if os.path.exists(os.path.join(s, "nvidia", "nccl", "lib", "libnccl.so.2"))), None)
    if not has_torch or not nvidia:
        print(f"skip (torch part): no torch or no nvidia/nccl wheel in {venv} (tools/install-deps --torch)")
        return False
    got = torch_runtime([sys.executable, tool, "run", "--shim", shim, "--", python, "-c", PROBE], env)
    check(got == "(2, 32, 3)", f"hoccl-nccl run: torch's runtime NCCL version is the shim's (2, 32, 3): {got}")
    site, _ = make_tree(os.path.join(tmp, "overlay"), [("nvidia/nccl/lib/libnccl.so.2", os.path.realpath(nvidia))])
    env["PYTHONPATH"] = site
    rc, out = hn("install", "--venv", os.path.join(tmp, "overlay"), "--shim", shim)
    check(rc == 0, f"install into the overlay: {out.strip()}")
    got = torch_runtime([python, "-c", PROBE], env)
    check(got == "(2, 32, 3)", f"installed, no LD_PRELOAD: torch's runtime NCCL version is the shim's: {got}")
    rc, out = hn("restore", "--venv", os.path.join(tmp, "overlay"))
    check(rc == 0, f"restore the overlay: {out.strip()}")
    got = torch_runtime([python, "-c", PROBE], env)
    check(got is not None and got != "(2, 32, 3)", f"restored: torch runs on NVIDIA's library again: {got}")
    return True


tmp = tempfile.mkdtemp(prefix="hoccl-nccl-test-")
try:
    layout_checks(tmp)
    ran_torch = torch_checks(tmp)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"hoccl-nccl: {'FAIL' if failures else 'PASS'} ({len(failures)} failed)"
      + ("" if ran_torch or failures else " (torch part skipped)"))
sys.exit(1 if failures else 0)
